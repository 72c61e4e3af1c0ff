#pragma once
// The element types kjit's operators take, as the host holds them: float, and the two 16-bit
// floats bit for bit as device memory stores them (IEEE binary16, and bfloat16: the top half of
// a float). Operators are templates over these types, so a pointer of the wrong type does not
// compile. The conversions to and from double are exact (to) and round to nearest even (from):
// what CPU references and tests need.
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace kjit::ops {

struct Half {
  std::uint16_t bits;
};
struct BFloat16 {
  std::uint16_t bits;
};

template <typename T>
concept Element =
    std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// The value of a template's type parameter naming T: "float", "half", "bfloat16".
template <Element T> constexpr std::string_view element_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, Half>)
    return "half";
  else
    return "bfloat16";
}

double to_double(float x);
double to_double(Half x);
double to_double(BFloat16 x);

// Rounds to nearest even; overflow gives infinity, NaN stays NaN.
template <Element T> T from_double(double x);
template <> float from_double<float>(double x);
template <> Half from_double<Half>(double x);
template <> BFloat16 from_double<BFloat16>(double x);

// The spacing of T's values relative to their magnitude (2^-23, 2^-10, 2^-7): one rounding to T
// is off by at most half of it. Tests derive their tolerances from it.
template <Element T> constexpr double epsilon() {
  if constexpr (std::is_same_v<T, float>)
    return 0x1p-23;
  else if constexpr (std::is_same_v<T, Half>)
    return 0x1p-10;
  else
    return 0x1p-7;
}

} // namespace kjit::ops

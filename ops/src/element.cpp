#include "kjit/ops/element.hpp"

#include <bit>
#include <cmath>

namespace kjit::ops {

double to_double(float x) { return x; }

double to_double(Half x) {
  const int exponent = x.bits >> 10 & 0x1f;
  const int mantissa = x.bits & 0x3ff;
  const double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                           : exponent == 31 ? (mantissa != 0 ? NAN : INFINITY)
                                            : std::ldexp(1024 + mantissa, exponent - 25);
  return (x.bits & 0x8000) != 0 ? -magnitude : magnitude;
}

double to_double(BFloat16 x) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16);
}

template <> float from_double<float>(double x) { return static_cast<float>(x); }

template <> Half from_double<Half>(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x))
    return {static_cast<std::uint16_t>(sign | 0x7e00)};
  const double magnitude = std::fabs(x);
  if (magnitude >= 65520.0) // halfway between the largest half (65504) and 2^16 rounds up
    return {static_cast<std::uint16_t>(sign | 0x7c00)};
  // Scale so that one unit in the last place of the result is 1, then round to nearest even:
  // 2^-24 for subnormals, 2^(e-10) for a normal number in [2^e, 2^(e+1)).
  int exponent = magnitude < 0x1p-14 ? -14 : std::ilogb(magnitude);
  const double units = std::nearbyint(std::ldexp(magnitude, 10 - exponent));
  // Rounding up may carry into the next binade (units == 2048): the encoding absorbs it, since
  // the mantissa field overflows into the exponent field.
  const auto encoded = exponent == -14 && units < 1024
                           ? static_cast<std::uint32_t>(units)
                           : static_cast<std::uint32_t>((exponent + 15) << 10) +
                                 static_cast<std::uint32_t>(units) - 1024;
  return {static_cast<std::uint16_t>(sign | encoded)};
}

template <> BFloat16 from_double<BFloat16>(double x) {
  // Through float: double -> float rounds to nearest even, and then float -> bfloat16 rounds the
  // low 16 bits to nearest even. Two roundings can differ from one only when the first lands
  // exactly halfway, which a CPU reference tolerates (far below bfloat16's own spacing).
  const std::uint32_t u = std::bit_cast<std::uint32_t>(static_cast<float>(x));
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return {static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  return {static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}

} // namespace kjit::ops

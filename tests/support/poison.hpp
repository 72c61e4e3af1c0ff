#pragma once
// Poison: memory a kernel writes is filled with 0xFF bytes before it runs (NaN as float, half,
// bfloat16 and e4m3), so that an element it skipped, or one it wrote past the end, shows.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace kjit::testing {

inline constexpr unsigned char poison_byte = 0xFF;

// `count` values of T, every byte poison.
template <typename T> std::vector<T> poisoned(std::size_t count) {
  std::vector<T> values(count);
  std::memset(values.data(), poison_byte, count * sizeof(T));
  return values;
}

// Whether every byte of `value` is still poison.
template <typename T> bool is_poison(const T &value) {
  const auto *bytes = reinterpret_cast<const unsigned char *>(&value);
  return std::all_of(bytes, bytes + sizeof(T), [](unsigned char b) { return b == poison_byte; });
}

} // namespace kjit::testing

#pragma once
// What the operators' wrappers share: argument checks that name the operator, and the alignment
// test behind their choice of packed access width.
#include "kjit/error.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kjit::ops::detail {

// Throws Error(bad_argument) "<op>: <what>" unless `ok`.
inline void require(bool ok, std::string_view op, std::string_view what) {
  if (!ok)
    throw Error(Errc::bad_argument, std::string(op) + ": " + std::string(what));
}

inline bool aligned(const void *pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

inline int divide_up(int x, int by) { return (x + by - 1) / by; }

} // namespace kjit::ops::detail

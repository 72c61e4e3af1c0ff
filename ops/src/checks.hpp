#pragma once
// What the operators' wrappers share: argument checks that name the operator, and the alignment
// test behind their choice of packed access width.
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"

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

// The compute capability of an NVIDIA target as a number ("sm_89" 89, "sm_90a" 90); 0 for AMD.
inline int nvidia_compute_capability(const jit::Target &target) {
  if (target.vendor() != Vendor::nvidia)
    return 0;
  const std::string &arch = target.arch(); // "sm_" then the digits
  int capability = 0;
  for (std::size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i)
    capability = capability * 10 + (arch[i] - '0');
  return capability;
}

} // namespace kjit::ops::detail

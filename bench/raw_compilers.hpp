#pragma once
// The baseline for kjit's compile overhead: the vendor compiler called directly through its C
// API, with the exact translation unit, headers, name expression and options kjit gives it.
#include "kjit/jit/compiler.hpp"

#include <cstddef>
#include <vector>

namespace kjit::bench {

// Compiles `request` with hiprtc (amd) or NVRTC (nvidia) called directly, returning the code
// object. Throws std::runtime_error if the library is missing or the compile fails.
std::vector<std::byte> raw_compile(const jit::CompileRequest &request);

} // namespace kjit::bench

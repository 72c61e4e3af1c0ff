#pragma once
// The two Compiler implementations, each in its own file; load_compiler picks one.
#include "kjit/jit/compiler.hpp"

#include <memory>

namespace kjit::jit {

// Both throw Error(compiler_unavailable) when their library cannot be loaded or lacks a function.
std::unique_ptr<Compiler> load_hiprtc();
std::unique_ptr<Compiler> load_nvrtc();

} // namespace kjit::jit

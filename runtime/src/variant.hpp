#pragma once
// From a bound template instance and a target to what the compiler is given and the cache key
// that names its output (DESIGN.md §2). Every input that can change the code is in the key.
#include "kjit/cache/key.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/templates/template.hpp"

namespace kjit {

struct Variant {
  jit::CompileRequest request;
  cache::KeyBuilder key_inputs;
  cache::Key key;
};

// Throws Error(bad_option) when the template's compile options cannot be keyed.
Variant describe_variant(const Instance &instance, const jit::Target &target,
                         const jit::Compiler &compiler);

// Wavefront width of `target`: 64 on GCN/CDNA (gfx9 and older), 32 on RDNA (gfx10 and newer,
// hiprtc's default there) and on NVIDIA.
int warp_size(const jit::Target &target);

} // namespace kjit

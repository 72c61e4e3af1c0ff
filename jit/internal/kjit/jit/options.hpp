#pragma once
// Compile options, canonicalised so that equivalent spellings give one cache key.
#include <span>
#include <string>
#include <vector>

namespace kjit::jit {

// Returns `options` in canonical form: surrounding whitespace trimmed, empty items dropped,
// "-D NAME" joined to "-DNAME", macro definitions (-D/-U) deduplicated and sorted (their
// order does not matter, as the compiler applies them before the source), every other
// option kept in its order (a later -O wins over an earlier one). The sorted macro options come
// first, then the others.
//
// Throws Error(bad_option) for two different -D/-U items naming one macro ("-DN=1", "-DN=2"; also
// "-DN" with "-UN"): their effect depends on their order, which the canonical form does not keep.
//
// Options are taken by an allow-list (jit/src/options.cpp, README.md "Compile options"): -D/-U,
// optimisation, floating-point, warning and debug-information flags of clang and NVRTC, and
// "-mllvm ARG" / "-Xclang ARG" whose argument passes the same test. Everything else throws
// Error(bad_option) naming the option and what to do instead, above all what the key cannot
// account for or what kjit owns: target selection (the Target does that), anything that makes
// the compiler read a file (-I, -isystem, --include-directory=, -include, -imacros, -Wp,...: the
// key hashes only the source and its Headers), output or preprocessing modes (-o, -E, -c, -M...).
std::vector<std::string> canonicalize_options(std::span<const std::string> options);

} // namespace kjit::jit

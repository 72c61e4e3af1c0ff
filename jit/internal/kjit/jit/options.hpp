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
// first, then the others. The argument of "-mllvm" and "-Xclang" is kept as it is (not read as a
// macro), but refused like an option when it is one kjit refuses.
//
// Throws Error(bad_option) for two different -D/-U items naming one macro ("-DN=1", "-DN=2"; also
// "-DN" with "-UN"): their effect depends on their order, which the canonical form does not keep.
//
// Throws Error(bad_option) for options the key cannot account for or that kjit owns:
// target selection (--gpu-architecture, --offload-arch, -arch, --mcpu...): the Target does
// that; include paths (-I, -isystem, --include-path): headers the key has not hashed would
// change the code unseen, pass them as Headers (-include and --pre-include too); output or
// preprocessing modes (-o, -E, -c, -S, -fsyntax-only, dependency output -M...).
std::vector<std::string> canonicalize_options(std::span<const std::string> options);

} // namespace kjit::jit

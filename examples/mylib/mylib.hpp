// mylib's kernels as its C++ code declares them: the one source of truth its set file
// (kernels.json) repeats for kjit_prebuild(), so that a prebuilt variant has the key its JIT call
// computes. Their sources are embedded from the files the set names (kjit_embed_sources()).
#pragma once
#include <kjit/kjit.hpp>

namespace mylib {

// kjit's configuration (KJIT_*), with mylib's installed prebuilt tier searched before kjit's own.
kjit::Config config();

// y = a * x + b * y; T float, half or bfloat16.
const kjit::Template &axpby();
// Rows of HIDDEN elements scaled to unit root mean square; its header folder is
// kernels/include, and MYLIB_EPS one of its compile options.
const kjit::Template &rms_norm();

} // namespace mylib

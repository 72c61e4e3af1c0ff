#pragma once

#include "kjit/vendor.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kjit::jit {

// A compiler release and the processors it lists, as kjit read them from that release's own
// compiler (comgr's ISA list for hiprtc).
struct KnownRelease {
  std::string_view version; // the ROCm or CUDA release: "6.4", "13.0"
  std::string_view archs;   // space-separated, in the compiler's order
};

// Every release kjit has read the target list of, oldest first.
const std::vector<KnownRelease> &known_releases(Vendor vendor);

// What Compiler::release() says for that release: "hiprtc, ROCm 6.4", "nvrtc 13.0".
std::string release_name(Vendor vendor, std::string_view version);

// The target names the known release that Compiler::release() calls `release` lists (empty when
// `release` is not a known one).
std::vector<std::string> known_release_archs(Vendor vendor, std::string_view release);

// Which compiler releases support `arch`, for an error about a compiler that does not: "ROCm 5.7,
// 6.4 and 7.2 list it", "NVRTC of CUDA 12 was the last to support it (CUDA 13 begins at sm_75)".
// Empty when kjit knows of none.
std::string releases_supporting(Vendor vendor, const std::string &arch);

} // namespace kjit::jit

#include "kjit/jit/compiler.hpp"

#include "compiler_releases.hpp"
#include "kjit/error.hpp"
#include "kjit/text.hpp"
#include "vendor_compilers.hpp"

#include <algorithm>

namespace kjit::jit {
namespace {

// A list for a message: "none" when empty.
std::string listed(const std::vector<std::string> &items) {
  return items.empty() ? "none" : join(items);
}

} // namespace

void Compiler::check_supported(const Target &target) const {
  if (target.vendor() != vendor())
    throw Error(Errc::unsupported_target,
                target.id() + " is an " + (target.vendor() == Vendor::amd ? "AMD" : "NVIDIA") +
                    " target; " + std::string(name()) + " compiles for " +
                    (vendor() == Vendor::amd ? "AMD" : "NVIDIA") + " GPUs only");

  const std::vector<TargetSupport> &supported = supported_targets();
  auto support = std::find_if(supported.begin(), supported.end(),
                              [&](const TargetSupport &s) { return s.arch == target.arch(); });
  if (support == supported.end()) {
    std::vector<std::string> archs;
    for (const TargetSupport &s : supported)
      archs.push_back(s.arch);
    // Name the releases that do support it: the fix is usually another compiler release.
    const std::string elsewhere = releases_supporting(vendor(), target.arch());
    throw Error(Errc::unsupported_target, target.arch() + " is not supported by " + release() +
                                              (elsewhere.empty() ? "" : "; " + elsewhere) +
                                              "; it supports: " + listed(archs));
  }
  for (const TargetFeature &feature : target.features()) {
    if (std::find(support->features.begin(), support->features.end(), feature.name) ==
        support->features.end())
      throw Error(Errc::unsupported_target, target.arch() + " has no feature '" + feature.name +
                                                "'; its features: " + listed(support->features));
  }
}

std::unique_ptr<Compiler> load_compiler(Vendor vendor) {
  return vendor == Vendor::amd ? load_hiprtc() : load_nvrtc();
}

} // namespace kjit::jit

#pragma once
// A GPU target id, parsed and validated: AMD `gfx90a`, `gfx90a:sramecc+:xnack-`; NVIDIA `sm_90`,
// `sm_90a`; AMD generic targets such as `gfx11-generic`, whose code runs on every processor of
// its family (code object version 6). The canonical id (features sorted by name) is what keys and
// paths use, so that `gfx90a:xnack-:sramecc+` and `gfx90a:sramecc+:xnack-` name one target.
#include "kjit/vendor.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::jit {

struct TargetFeature {
  std::string name; // "sramecc", "xnack"
  bool enabled;     // '+' or '-'
  bool operator==(const TargetFeature &) const = default;
};

class Target {
public:
  // Throws Error(Errc::bad_target) with the reason when `text` is not a target id. Parsing is
  // strict rather than forgiving: upper case, surrounding spaces and leading zeros are refused,
  // not normalised, so that the one spelling a user sees in errors and paths is the one to type.
  // An NVIDIA arch may end in 'a' (sm_90a) or 'f' (sm_100f); whether the compiler can emit it is
  // Compiler::check_supported's question, not the parser's.
  static Target parse(std::string_view text);

  Vendor vendor() const { return vendor_; }
  // The processor alone: "gfx90a", "sm_90a".
  const std::string &arch() const { return arch_; }
  // AMD features given explicitly, sorted by name. Absent means "any".
  const std::vector<TargetFeature> &features() const { return features_; }
  // Canonical id: arch followed by ":name+" / ":name-" for each feature in name order.
  const std::string &id() const { return id_; }
  // An AMD generic target ("gfx11-generic"), not one processor.
  bool is_generic() const;
  // Wavefront width: 64 on GCN/CDNA (gfx9 and older), 32 on RDNA (gfx10 and newer, hiprtc's
  // default there) and on NVIDIA. Kernels see it as KJIT_WARP_SIZE; hosts pick launch shapes by it.
  int warp_size() const;
  // A hash of id(), computed once at parse time, for in-memory lookups.
  std::uint64_t hash() const { return hash_; }

  bool operator==(const Target &other) const { return id_ == other.id_; }

private:
  Target() = default;
  Vendor vendor_ = Vendor::amd;
  std::string arch_;
  std::vector<TargetFeature> features_;
  std::string id_;
  std::uint64_t hash_ = 0;
};

// The generic target whose code runs on `processor` ("gfx11-generic" for "gfx1101"), per LLVM's
// AMDGPUUsage; nullopt for a processor no generic target serves (gfx90a) or that is one itself.
std::optional<std::string> generic_family(std::string_view processor);

// The targets whose code runs on a device of `target`, in the order lookups try them before
// compiling for `target`: `target` itself; then the same processor with fewer of its features
// named, down to none (code built for no setting of a feature runs under either); then its
// generic family with those feature subsets, restricted to the features the family takes
// (gfx942:sramecc+:xnack- ... gfx942, gfx9-4-generic:sramecc+:xnack- ... gfx9-4-generic). An
// NVIDIA sm_90a or sm_100f is served by sm_90 or sm_100 code, never the reverse.
std::vector<Target> serving_targets(const Target &target);

// "gfx9-generic, gfx9-4-generic, ...", for messages.
std::string generic_target_names();

} // namespace kjit::jit

#pragma once
// Why a variant would compile: what `Runtime::explain` and `kjit cache explain` report
// (docs/ARCHITECTURE.md, "Why did it compile?"): the key a lookup uses, whether each tier holds
// it, and for the nearest entries of the same template and target, which key inputs differ.
#include "kjit/cache/key.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace kjit {

// What one tier holds under the key.
struct TierLookup {
  enum class State {
    holds,       // a valid entry for the key and target
    missing,     // nothing under the key
    rejected,    // something under the key that is not a valid entry (`detail` says why): a miss
    unreachable, // a remote that did not answer (`detail` says why)
  };
  std::string tier; // "memory", "prebuilt", "prebuilt:DIR", "user", "remote <description>"
  State state = State::missing;
  std::string target; // the target the entry is for: a serving target's when it stands in
  std::string path;   // the entry's file, for a disk tier
  std::string detail;
};
std::string_view to_string(TierLookup::State state);

// An entry of the same template and target whose key is not the one looked up.
struct NearEntry {
  std::string tier;
  std::string path;
  cache::Key key;
  std::vector<cache::KeyDifference> differences; // never empty
};

struct Explanation {
  cache::Key key;
  std::string template_name;
  std::string target;
  std::vector<cache::KeyField> key_inputs; // what `key` is computed from, in order
  // In lookup order; a tier that holds an entry of a serving target standing in for this one (an
  // entry for gfx90a serving gfx90a:sramecc+:xnack-) is listed with that target.
  std::vector<TierLookup> tiers;
  // Up to `Explanation::kNearest` entries of the local tiers, fewest differences first.
  std::vector<NearEntry> nearest;
  static constexpr std::size_t kNearest = 3;

  // True when a lookup would find an entry (in any tier, for this target or a serving one).
  bool found() const;
  // One line: "held by the user tier", or why a lookup misses: "no entry of scale for gfx90a",
  // "the nearest entry (user) differs in parameter N (4096, entry 2048)".
  std::string reason() const;
};

// "parameter N (2048, entry 4096)", "option -O3 (entry only)", "source (3f2a..., entry 9b1c...)":
// one difference in a line's words.
std::string describe(const cache::KeyDifference &difference);

} // namespace kjit

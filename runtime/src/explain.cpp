#include "kjit/runtime/explain.hpp"

#include "kjit/cache/catalog.hpp"
#include "nearest_entries.hpp"

#include <algorithm>

namespace kjit {

std::string_view to_string(TierLookup::State state) {
  switch (state) {
  case TierLookup::State::holds:
    return "holds";
  case TierLookup::State::missing:
    return "missing";
  case TierLookup::State::rejected:
    return "rejected";
  case TierLookup::State::unreachable:
    return "unreachable";
  }
  return "?";
}

namespace {

// A digest as its first 12 hex digits, which name it in a line; any other value whole.
std::string shown(const std::string &value) {
  const bool digest =
      value.size() == 64 && value.find_first_not_of("0123456789abcdef") == std::string::npos;
  return digest ? value.substr(0, 12) + "..." : value;
}

// "parameter N", "header kjit/prelude.h", "option", "source".
std::string subject(const cache::KeyDifference &difference) {
  std::string text(to_string(difference.kind));
  if (const std::size_t colon = difference.name.find(':'); colon != std::string::npos)
    text += " " + difference.name.substr(colon + 1);
  else if (difference.kind == cache::KeyInputKind::other)
    text += " " + difference.name;
  return text;
}

} // namespace

std::string describe(const cache::KeyDifference &difference) {
  const std::string what = subject(difference);
  if (difference.wanted && difference.found)
    return what + " (" + shown(*difference.wanted) + ", entry " + shown(*difference.found) + ")";
  if (difference.wanted)
    return what + " " + shown(*difference.wanted) + " (not in the entry)";
  return what + " " + shown(difference.found.value_or("")) + " (entry only)";
}

bool Explanation::found() const {
  return std::ranges::any_of(
      tiers, [](const TierLookup &tier) { return tier.state == TierLookup::State::holds; });
}

std::string Explanation::reason() const {
  for (const TierLookup &tier : tiers)
    if (tier.state == TierLookup::State::holds)
      return "held by the " + tier.tier + " tier" +
             (tier.target == target ? std::string() : " as an entry for " + tier.target);
  if (nearest.empty())
    return "no entry of " + template_name + " for " + target;
  const NearEntry &near = nearest.front();
  std::string differs;
  for (const cache::KeyDifference &difference : near.differences)
    differs += (differs.empty() ? "" : "; ") + describe(difference);
  return "the nearest entry (" + near.tier + ", " + near.key.hex().substr(0, 12) + ") differs in " +
         differs;
}

std::vector<NearEntry> nearest_entries(const std::vector<LocalTiers::Named> &tiers,
                                       std::string_view template_name, const std::string &target,
                                       const std::vector<cache::KeyField> &wanted,
                                       std::size_t limit) {
  std::vector<NearEntry> near;
  for (const auto &[store, tier] : tiers)
    for (const cache::ListedEntry &listed : cache::list(*store, target)) {
      if (!listed.summary || listed.summary->template_name != template_name)
        continue;
      std::string problem;
      const std::optional<cache::EntryHeader> header =
          cache::read_header(listed.stored.path, problem);
      if (!header)
        continue;
      std::vector<cache::KeyDifference> differences =
          cache::diff_key_inputs(wanted, header->key_inputs);
      if (!differences.empty())
        near.push_back({tier, listed.stored.path, header->key, std::move(differences)});
    }
  std::ranges::stable_sort(near, {},
                           [](const NearEntry &entry) { return entry.differences.size(); });
  if (near.size() > limit)
    near.resize(limit);
  return near;
}

} // namespace kjit

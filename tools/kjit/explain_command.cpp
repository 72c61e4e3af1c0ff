#include "explain_command.hpp"

#include "json_output.hpp"
#include "table.hpp"
#include "template_args.hpp"

#include "kjit/kjit.hpp"

#include <optional>
#include <ostream>

namespace kjit::cli {
namespace {

using nlohmann::json;

// A new process's memory holds nothing: the Runtime's memory row says nothing to a command.
bool in_this_process(const TierLookup &tier) { return tier.tier == "memory"; }

json difference_json(const cache::KeyDifference &difference) {
  auto optional = [](const std::optional<std::string> &value) {
    return value ? json(*value) : json(nullptr);
  };
  return {{"kind", to_string(difference.kind)},
          {"name", difference.name},
          {"wanted", optional(difference.wanted)},
          {"found", optional(difference.found)},
          {"says", describe(difference)}};
}

json explanation_json(const Explanation &explained) {
  json tiers = json::array();
  for (const TierLookup &tier : explained.tiers)
    tiers.push_back({{"tier", tier.tier},
                     {"state", in_this_process(tier) ? "n/a" : to_string(tier.state)},
                     {"target", tier.target},
                     {"path", tier.path},
                     {"detail", tier.detail}});
  json nearest = json::array();
  for (const NearEntry &near : explained.nearest) {
    json differences = json::array();
    for (const cache::KeyDifference &difference : near.differences)
      differences.push_back(difference_json(difference));
    nearest.push_back({{"tier", near.tier},
                       {"key", near.key.hex()},
                       {"path", near.path},
                       {"differences", differences}});
  }
  return {{"key", explained.key.hex()},
          {"template", explained.template_name},
          {"target", explained.target},
          {"found", explained.found()},
          {"reason", explained.reason()},
          {"key_inputs", explained.key_inputs},
          {"tiers", tiers},
          {"nearest", nearest}};
}

void print_explanation(const Explanation &explained, const ParamValues &params, std::ostream &out) {
  out << explained.template_name << " (" << params.to_string() << ") for " << explained.target
      << '\n'
      << "key      " << explained.key.hex() << '\n'
      << "verdict  " << explained.reason() << "\n\n";
  Table tiers({"tier", "state", "entry"});
  for (const TierLookup &tier : explained.tiers) {
    if (in_this_process(tier))
      continue;
    std::string entry = tier.path;
    if (tier.target != explained.target)
      entry += " (an entry for " + tier.target + ")";
    if (!tier.detail.empty())
      entry += (entry.empty() ? "" : ": ") + tier.detail;
    tiers.add({tier.tier, std::string(to_string(tier.state)), entry});
  }
  tiers.print(out);
  if (explained.nearest.empty())
    return;
  out << "\nnearest entries of " << explained.template_name << " for " << explained.target << '\n';
  for (const NearEntry &near : explained.nearest) {
    out << "  " << near.key.hex().substr(0, 12) << " (" << near.tier << ") differs in\n";
    for (const cache::KeyDifference &difference : near.differences)
      out << "    " << describe(difference) << '\n';
  }
}

} // namespace

int run_explain(const ExplainArgs &args, bool as_json, std::ostream &out) {
  if (args.target.empty())
    throw Error(Errc::bad_target, "--target is required (e.g. --target gfx90a or sm_90)");
  const ParamValues params = parse_params(args.params);
  std::optional<templates::VariantSet> set;
  if (!args.sets_file.empty())
    set.emplace(templates::VariantSet::read_file(args.sets_file));
  const Template &tmpl =
      set ? template_from_set(*set, args.template_name) : templates::find(args.template_name);
  Runtime runtime;
  const Explanation explained = runtime.explain(tmpl, params, jit::Target::parse(args.target));
  if (as_json)
    print_json(out, explanation_json(explained));
  else
    print_explanation(explained, params, out);
  return 0;
}

} // namespace kjit::cli

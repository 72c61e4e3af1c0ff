#include "plans.hpp"

#include "kjit/error.hpp"
#include "kjit/log.hpp"

#include <bit>
#include <memory>

namespace kjit::ops::detail {

namespace {

struct PlanKeyHash {
  std::size_t operator()(const PlanKey &key) const {
    return hash_key(key.runtime,
                    {reinterpret_cast<std::uint64_t>(key.op),
                     static_cast<std::uint64_t>(key.length), static_cast<std::uint64_t>(key.rows),
                     static_cast<std::uint64_t>(key.element * 64 + key.aligned_vec)});
  }
};

std::unordered_map<PlanKey, Plan, PlanKeyHash> &plans() {
  thread_local std::unordered_map<PlanKey, Plan, PlanKeyHash> of_this_thread;
  return of_this_thread;
}

} // namespace

std::int64_t rows_bucket(std::int64_t rows) {
  return static_cast<std::int64_t>(
      std::bit_ceil(static_cast<std::uint64_t>(std::max<std::int64_t>(rows, 1))));
}

const Plan *find_plan(const PlanKey &key) {
  auto &all = plans();
  auto found = all.find(key);
  return found == all.end() ? nullptr : &found->second;
}

const Plan &remember_plan(const PlanKey &key, const Plan &plan) {
  return plans().insert_or_assign(key, plan).first->second;
}

TuningLookup tuning_lookup(Runtime &rt) {
  const Device &device = rt.default_device();
  TuningLookup lookup{
      {device.target().id(), device.multiprocessors(), device.name()}, {}, TuningTable({})};
  try {
    lookup.table = TuningTable::from_config(rt.config());
    lookup.compiler = rt.compiler_identity(device.vendor());
  } catch (const Error &error) {
    log().debug("no tuning records for {}: {}", device.target().id(), error.summary());
    lookup.compiler.clear();
  }
  return lookup;
}

std::optional<TimedVariant> tuned_winner(const TuningLookup &lookup, const Template &tmpl,
                                         const ParamValues &problem, const ParamValues &extents) {
  if (lookup.compiler.empty())
    return std::nullopt;
  try {
    const TuningKey key = TuningKey::of(tmpl, problem, extents, lookup.device, lookup.compiler);
    const std::optional<TuningRecord> record = lookup.table.find(key);
    if (!record)
      return std::nullopt;
    // The table is untrusted input: a winner the template refuses would make rt.kernel throw.
    if (const std::string problem = winner_problem(tmpl, *record); !problem.empty()) {
      if (first_warning_about("tuned winner " + key.key().hex()))
        log().warn("ignoring the tuning record {} of {}: {}; using the heuristic", key.key().hex(),
                   tmpl.name(), problem);
      return std::nullopt;
    }
    return record->winner;
  } catch (const Error &error) {
    log().debug("no tuning record for {}: {}", tmpl.name(), error.summary());
  }
  return std::nullopt;
}

std::optional<TimedVariant> tuned_winner(Runtime &rt, const Template &tmpl,
                                         const ParamValues &problem, const ParamValues &extents) {
  try {
    return tuned_winner(tuning_lookup(rt), tmpl, problem, extents);
  } catch (const Error &error) {
    log().debug("no tuning record for {}: {}", tmpl.name(), error.summary());
  }
  return std::nullopt;
}

int winner_value(const TimedVariant &winner, std::string_view name, int fallback) {
  const Value *value = winner.params.find(name);
  return value != nullptr && value->is_integer() ? static_cast<int>(value->integer()) : fallback;
}

ChosenVariant with_winner(const ChosenVariant &variant, const TimedVariant &winner) {
  ChosenVariant tuned = variant;
  for (const auto &[name, value] : variant.params) {
    const ParamSchema &schema = variant.tmpl->param(name)->param;
    if (!schema.is_tunable())
      continue;
    const int unrecorded = schema.fallback() ? static_cast<int>(schema.fallback()->integer())
                                             : static_cast<int>(value.integer());
    tuned.params.set(name, winner_value(winner, name, unrecorded));
  }
  return tuned;
}

ChosenVariant tuned_variant(const TuningLookup &lookup, const ChosenVariant &heuristic,
                            const ParamValues &problem, const ParamValues &extents) {
  const std::optional<TimedVariant> winner =
      tuned_winner(lookup, *heuristic.tmpl, problem, extents);
  return winner ? with_winner(heuristic, *winner) : heuristic;
}

} // namespace kjit::ops::detail

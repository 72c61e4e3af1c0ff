#include "kjit/runtime/tuner.hpp"

#include "kjit/error.hpp"

#include <algorithm>
#include <cmath>

namespace kjit {

namespace {

[[noreturn]] void bad_space(const Template &tmpl, const std::string &what) {
  throw Error(Errc::bad_parameter, tmpl.name() + ": search space: " + what);
}

std::string params_text(const Params &params) {
  std::string out;
  for (const auto &[name, value] : params)
    out += (out.empty() ? "" : ",") + name + "=" + value.to_string();
  return out;
}

// Every value `param` allows, or none for an integer range.
std::vector<Value> allowed_values(const Param &param) {
  std::vector<Value> values;
  if (param.kind() == Param::Kind::type)
    for (const std::string &type : param.allowed_types())
      values.emplace_back(type);
  else
    for (std::int64_t integer : param.allowed_integers())
      values.emplace_back(integer);
  return values;
}

// The space with every tunable parameter of `tmpl`, in declaration order.
SearchSpace complete_space(const Template &tmpl, const SearchSpace &given) {
  for (const auto &[name, values] : given) {
    const ParamDecl *decl = tmpl.param(name);
    if (decl == nullptr)
      bad_space(tmpl, "unknown parameter '" + name + "'");
    if (!decl->param.is_tunable())
      bad_space(tmpl, "'" + name + "' is a problem parameter, not a tunable one");
    if (values.empty())
      bad_space(tmpl, "'" + name + "' has no values");
  }
  SearchSpace space;
  for (const ParamDecl &decl : tmpl.params()) {
    if (!decl.param.is_tunable())
      continue;
    auto named = std::find_if(given.begin(), given.end(),
                              [&](const auto &entry) { return entry.first == decl.name; });
    std::vector<Value> values = named != given.end() ? named->second : allowed_values(decl.param);
    if (values.empty())
      bad_space(tmpl, "'" + decl.name + "' is " + decl.param.describe() + ": name its values");
    space.emplace_back(decl.name, std::move(values));
  }
  return space;
}

} // namespace

Candidates tuning_candidates(const TuningProblem &problem, const SearchSpace &given,
                             std::string_view target) {
  const Template &tmpl = *problem.tmpl;
  for (const auto &[name, value] : problem.problem) {
    const ParamDecl *decl = tmpl.param(name);
    if (decl != nullptr && decl->param.is_tunable())
      throw Error(Errc::bad_parameter, tmpl.name() + ": '" + name +
                                           "' is tunable: leave it out of the problem and name "
                                           "its values in the search space");
  }
  const SearchSpace space = complete_space(tmpl, given);
  Candidates candidates;
  // Odometer over the space's values, the last parameter fastest.
  std::vector<std::size_t> at(space.size(), 0);
  for (bool more = true; more;) {
    Params params = problem.problem;
    Params tunable;
    for (std::size_t i = 0; i < space.size(); ++i)
      tunable.emplace_back(space[i].first, space[i].second[at[i]]);
    params.insert(params.end(), tunable.begin(), tunable.end());
    std::string why;
    try {
      const Instance instance = tmpl.bind(params);
      if (tmpl.tuning().fits)
        why = tmpl.tuning().fits(instance, target);
    } catch (const Error &error) {
      // A value the parameter does not allow is the caller's mistake, not a refused candidate.
      bad_space(tmpl, error.summary());
    }
    if (why.empty())
      candidates.accepted.push_back(std::move(tunable));
    else
      candidates.refused.emplace_back(std::move(tunable), std::move(why));
    more = false;
    for (std::size_t i = space.size(); i-- > 0;) {
      if (++at[i] < space[i].second.size()) {
        more = true;
        break;
      }
      at[i] = 0;
    }
  }
  if (candidates.accepted.empty())
    bad_space(
        tmpl,
        "no candidate fits " + std::string(target) + " (" +
            std::to_string(candidates.refused.size()) + " refused" +
            (candidates.refused.empty() ? "" : ", e.g. " + candidates.refused.front().second) +
            ")");
  return candidates;
}

double relative_difference(const std::vector<double> &a, const std::vector<double> &b) {
  if (a.size() != b.size())
    return INFINITY;
  double difference = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i]))
      return INFINITY;
    if (std::isnan(a[i]))
      continue;
    difference += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  if (norm == 0)
    return difference == 0 ? 0 : INFINITY;
  return std::sqrt(difference / norm);
}

TuneResult tune(const TuningProblem &problem, const TuneOptions &options, std::string_view target,
                const Measure &measure) {
  const Template &tmpl = *problem.tmpl;
  if (!(options.budget_s > 0))
    throw Error(Errc::bad_parameter, tmpl.name() + ": the tuning budget is " +
                                         std::to_string(options.budget_s) +
                                         " s: too small for one candidate");
  Candidates candidates = tuning_candidates(problem, options.space, target);
  TuneResult result;
  result.dropped = std::move(candidates.refused);
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };

  std::vector<TimedVariant> timed;
  std::vector<double> reference;
  const std::size_t total = candidates.accepted.size();
  for (std::size_t i = 0; i < total; ++i) {
    const Params &tunable = candidates.accepted[i];
    Params full = problem.problem;
    full.insert(full.end(), tunable.begin(), tunable.end());
    try {
      Measurement measured = measure(full);
      ++result.tried;
      if (timed.empty() && reference.empty()) {
        reference = std::move(measured.output);
        timed.push_back({tunable, measured.time_us});
      } else if (const double difference = relative_difference(measured.output, reference);
                 difference > options.tolerance) {
        result.dropped.emplace_back(tunable, "its output differs from the reference " +
                                                 params_text(timed.front().params) + " by " +
                                                 std::to_string(difference));
      } else {
        timed.push_back({tunable, measured.time_us});
      }
    } catch (const Error &error) {
      ++result.tried;
      result.dropped.emplace_back(tunable, error.summary());
    }
    if (options.progress)
      options.progress(i + 1, total);
    if (elapsed() > options.budget_s && i + 1 < total) {
      if (result.tried == 1)
        throw Error(Errc::bad_parameter, tmpl.name() + ": the tuning budget of " +
                                             std::to_string(options.budget_s) +
                                             " s is too small for one candidate: the first took " +
                                             std::to_string(elapsed()) + " s");
      result.untried = total - (i + 1);
      break;
    }
  }
  result.seconds = elapsed();
  if (timed.empty()) {
    std::string reasons;
    for (const auto &[params, why] : result.dropped)
      reasons += "  " + params_text(params) + ": " + why + "\n";
    throw Error(Errc::device_error,
                tmpl.name() + " (" + params_text(problem.problem) + "): no candidate ran", reasons);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto &a, const auto &b) { return a.time_us < b.time_us; });
  result.winner = timed.front();
  for (std::size_t i = 1; i < timed.size() && result.runners_up.size() < options.runners_up; ++i)
    result.runners_up.push_back(timed[i]);
  return result;
}

} // namespace kjit

#include "kjit/runtime/tuner.hpp"

#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "kjit/runtime/runtime.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>

namespace kjit {

namespace {

[[noreturn]] void bad_space(const Template &tmpl, const std::string &what) {
  throw Error(Errc::bad_parameter, tmpl.name() + ": search space: " + what);
}

// Every value `param` allows, or none for an integer range.
std::vector<Value> allowed_values(const ParamSchema &param) {
  std::vector<Value> values;
  if (param.kind() == ParamSchema::Kind::type)
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
    ParamValues tunable;
    for (std::size_t i = 0; i < space.size(); ++i)
      tunable.add(space[i].first, space[i].second[at[i]]);
    std::string why;
    try {
      ParamValues params = problem.problem;
      params.add(tunable);
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

void check_tune_options(const TuningProblem &problem, const TuneOptions &options) {
  const Template &tmpl = *problem.tmpl;
  if (!(options.budget_s > 0))
    throw Error(Errc::bad_parameter, tmpl.name() + ": the tuning budget is " +
                                         std::to_string(options.budget_s) +
                                         " s: too small for one candidate");
  // Each value bound beside the first of the others: what the target's rules refuse is not the
  // caller's mistake, and is left to tuning_candidates.
  const SearchSpace space = complete_space(tmpl, options.space);
  for (const auto &[name, values] : space)
    for (const Value &value : values) {
      ParamValues params = problem.problem;
      for (const auto &[other, others] : space)
        params.add(other, other == name ? value : others.front());
      try {
        tmpl.bind(params);
      } catch (const Error &error) {
        bad_space(tmpl, error.summary());
      }
    }
}

TuneResult tune(const TuningProblem &problem, const TuneOptions &options, std::string_view target,
                const Measure &measure) {
  const Template &tmpl = *problem.tmpl;
  check_tune_options(problem, options);
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
    const ParamValues &tunable = candidates.accepted[i];
    try {
      ParamValues full = problem.problem;
      full.add(tunable);
      Measurement measured = measure(full);
      ++result.tried;
      if (timed.empty() && reference.empty()) {
        reference = std::move(measured.output);
        timed.push_back({tunable, measured.time_us});
      } else if (const double difference = relative_difference(measured.output, reference);
                 difference > options.tolerance) {
        result.dropped.emplace_back(tunable, "its output differs from the reference " +
                                                 timed.front().params.to_string() + " by " +
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
      reasons += "  " + params.to_string() + ": " + why + "\n";
    throw Error(Errc::device_error,
                tmpl.name() + " (" + problem.problem.to_string() + "): no candidate ran", reasons);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto &a, const auto &b) { return a.time_us < b.time_us; });
  result.winner = timed.front();
  result.timed = timed;
  for (std::size_t i = 1; i < timed.size() && result.runners_up.size() < options.runners_up; ++i)
    result.runners_up.push_back(timed[i]);
  return result;
}

namespace {

// Bytes written to flush the L2 cache: more than any current GPU's (H100 50 MB, MI300X 256 MB of
// Infinity Cache is not flushed by this, nor needs to be for the kernels tuned here).
constexpr std::size_t kFlushBytes = 256u << 20;

double half_to_double(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  const double sign = bits & 0x8000 ? -1.0 : 1.0;
  if (exponent == 0x1f)
    return mantissa != 0 ? NAN : sign * INFINITY;
  if (exponent == 0)
    return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

// Elements read back whole, and the runs a larger output is sampled in.
constexpr std::size_t kWholeElements = 1u << 22;
constexpr std::size_t kSampleRuns = 256, kSampleRun = 1u << 14;

void append_values(const std::vector<std::byte> &bytes, TunedOutput::Element element,
                   std::vector<double> &values) {
  const std::size_t width = element == TunedOutput::Element::f32 ? 4 : 2;
  for (std::size_t at = 0; at + width <= bytes.size(); at += width) {
    if (element == TunedOutput::Element::f32) {
      float value;
      std::memcpy(&value, bytes.data() + at, 4);
      values.push_back(value);
      continue;
    }
    std::uint16_t bits;
    std::memcpy(&bits, bytes.data() + at, 2);
    values.push_back(element == TunedOutput::Element::f16
                         ? half_to_double(bits)
                         : std::bit_cast<float>(std::uint32_t{bits} << 16));
  }
}

std::vector<double> read_output(const Device &device, const TunedOutput &output) {
  const std::size_t width = output.element == TunedOutput::Element::f32 ? 4 : 2;
  std::vector<std::pair<std::size_t, std::size_t>> runs; // first element, count
  if (output.elements <= kWholeElements) {
    runs.emplace_back(0, output.elements);
  } else {
    for (std::size_t r = 0; r < kSampleRuns; ++r)
      runs.emplace_back((output.elements - kSampleRun) * r / (kSampleRuns - 1), kSampleRun);
  }
  std::vector<double> values;
  std::vector<std::byte> bytes;
  for (const auto &[first, count] : runs) {
    bytes.resize(count * width);
    device.copy_to_host(
        bytes.data(), static_cast<const std::byte *>(output.address) + first * width, bytes.size());
    append_values(bytes, output.element, values);
  }
  return values;
}

} // namespace

void precompile(Runtime &rt, const TuningProblem &problem,
                const std::vector<ParamValues> &candidates, const jit::Target &target) {
  const Config &config = rt.config();
  if (config.cache_dir.empty() || config.mode != Mode::jit)
    return;
  std::vector<prebuild::TargetedInstance> variants;
  for (const ParamValues &tunable : candidates) {
    ParamValues full = problem.problem;
    full.add(tunable);
    variants.push_back({problem.tmpl->bind(full), target});
  }
  const prebuild::Compilers compilers({target});
  for (const prebuild::Batch &batch : prebuild::make_batches(std::move(variants)))
    if (!prebuild::up_to_date(batch, compilers, config.cache_dir)) {
      const prebuild::BatchResult built = prebuild::build(batch, compilers, config.cache_dir);
      for (const prebuild::Failure &failure : built.failures)
        log().debug("tuning: {}", failure.what);
    }
}

Measure measure_on_device(Runtime &rt, const Device &device, const Template &tmpl, Launcher launch,
                          std::vector<TunedOutput> outputs, Stream stream, DeviceTiming timing) {
  struct State {
    std::optional<DeviceBuffer> flush;
  };
  auto state = std::make_shared<State>();
  return [&rt, device, &tmpl, launch = std::move(launch), outputs = std::move(outputs), stream,
          timing, state](const ParamValues &candidate) {
    const TuningRules &rules = tmpl.tuning();
    const Instance instance = tmpl.bind(candidate);
    if (rules.shared_bytes) {
      const std::int64_t needed = rules.shared_bytes(instance);
      if (needed > static_cast<std::int64_t>(device.shared_memory_per_block()))
        throw Error(Errc::device_error,
                    "needs " + std::to_string(needed) + " bytes of shared memory a block; " +
                        device.name() + " has " + std::to_string(device.shared_memory_per_block()));
    }
    const Kernel &kernel = rt.kernel(tmpl, candidate, device);
    if (rules.threads) {
      const std::int64_t threads = rules.threads(instance);
      if (threads > kernel.max_threads_per_block())
        throw Error(Errc::device_error,
                    "launches " + std::to_string(threads) + " threads a block; with " +
                        std::to_string(kernel.registers()) + " registers a thread it may have " +
                        std::to_string(kernel.max_threads_per_block()));
    }
    Measurement measured;
    for (const TunedOutput &output : outputs)
      device.fill(const_cast<void *>(output.address), 0xff,
                  output.elements * (output.element == TunedOutput::Element::f32 ? 4 : 2), stream);
    launch(kernel, candidate, stream);
    device.synchronize();
    for (const TunedOutput &output : outputs) {
      std::vector<double> values = read_output(device, output);
      measured.output.insert(measured.output.end(), values.begin(), values.end());
    }

    for (int i = 0; i < timing.warmup; ++i)
      launch(kernel, candidate, stream);
    EventTimer timer(device);
    auto burst = [&](int launches) {
      if (rules.flush_l2) {
        if (!state->flush)
          state->flush.emplace(device.allocate(kFlushBytes));
        device.fill(state->flush->data(), 0, kFlushBytes, stream);
      }
      timer.start(stream);
      for (int i = 0; i < launches; ++i)
        launch(kernel, candidate, stream);
      timer.stop(stream);
      return timer.elapsed_ms() * 1000.0 / launches;
    };
    // One launch gives the count that fills a burst; with the L2 flushed, each burst is one
    // launch after a flush.
    const double single_us = burst(1);
    const int launches =
        rules.flush_l2
            ? 1
            : std::clamp(static_cast<int>(timing.burst_us / std::max(single_us, 0.1)), 1, 1000);
    std::vector<double> times;
    for (int b = 0; b < timing.bursts; ++b)
      times.push_back(burst(launches));
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    measured.time_us = times[times.size() / 2];
    return measured;
  };
}

} // namespace kjit

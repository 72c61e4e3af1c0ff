#pragma once
// The tuner: which values of a template's tunable parameters run a problem fastest on a device.
//
//   kjit::TuningProblem problem{&tmpl, {{"T", "bfloat16"}, {"HIDDEN", 4096}}};
//   kjit::TuneResult result = kjit::tune(problem, {}, device_name, measure);
//
// The candidates are the search space's combinations (by default every allowed value of every
// tunable parameter), less those the template's TuningRules refuse for the target. `measure`
// runs one candidate and returns its median time and its output; it throws kjit::Error when the
// candidate does not compile or launch. The first candidate that runs is the reference: a later
// one whose output differs from it beyond the tolerance is dropped, as are those that fail, each
// with its reason. The fastest of the rest wins.
#include "kjit/runtime/device.hpp"
#include "kjit/runtime/kernel.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/template.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kjit {

// Values to try per tunable parameter: {{"VEC", {4, 8}}, {"THREADS", {128, 256}}}. A parameter
// left out takes every value it allows (an integer range with no list of values has none: name
// its values).
using SearchSpace = std::vector<std::pair<std::string, std::vector<Value>>>;

struct TuningProblem {
  const Template *tmpl;
  ParamValues problem; // every problem parameter
};

// The combinations of `space` (completed as above) bound with `problem`, in order, and the
// reason each one the template's rules refuse on `target` was left out. Throws
// Error(bad_parameter) for a search space naming an unknown or a problem parameter, or a value
// the parameter does not allow, and when no candidate is left.
struct Candidates {
  std::vector<ParamValues> accepted;
  std::vector<std::pair<ParamValues, std::string>> refused;
};
Candidates tuning_candidates(const TuningProblem &problem, const SearchSpace &space,
                             std::string_view target);

// One candidate's run, from `measure`.
struct Measurement {
  double time_us = 0;         // median over the bursts
  std::vector<double> output; // what it wrote, as numbers, for the agreement check
};
using Measure = std::function<Measurement(const ParamValues &candidate)>;

struct TuneOptions {
  SearchSpace space;
  // Wall-clock seconds for measuring; the candidates left when it is spent are not tried. A
  // budget the first candidate alone overruns is an error.
  double budget_s = 60;
  // ||candidate - reference|| / ||reference|| at most this (16-bit outputs: 1e-2).
  double tolerance = 1e-2;
  // Runners-up kept in the record.
  std::size_t runners_up = 4;
  // Called after each candidate with (done, total), for a progress bar.
  std::function<void(std::size_t, std::size_t)> progress = {};
};

struct TuneResult {
  TimedVariant winner; // the tunable values alone
  std::vector<TimedVariant> runners_up;
  std::vector<TimedVariant> timed; // every candidate that ran and agreed, fastest first
  std::vector<std::pair<ParamValues, std::string>> dropped; // failed, disagreed, or refused
  std::size_t tried = 0, untried = 0;
  double seconds = 0;
};

// What tune() refuses before measuring anything: a search space naming an unknown or a problem
// parameter, or a value its parameter does not allow, and a budget that is not positive. Throws
// Error(bad_parameter); a caller checks with it before it looks for a device.
void check_tune_options(const TuningProblem &problem, const TuneOptions &options);

// Throws Error(bad_parameter) for a bad search space or a budget that is not positive or that
// the first candidate overran; Error(device_error) when no candidate ran and agreed (the reasons
// in its detail).
TuneResult tune(const TuningProblem &problem, const TuneOptions &options, std::string_view target,
                const Measure &measure);

class Runtime;

// ---- measuring on a GPU ------------------------------------------------------------------

// An output buffer the tuner compares between candidates: poisoned (all bits set: NaN in every
// float format) before a candidate's checking run, then read back: all of it up to 4M elements,
// else 256 runs of 16K elements spread evenly over it, the last ending at its end (reading
// gigabytes back for each candidate would cost more than timing it).
struct TunedOutput {
  enum class Element { f32, f16, bf16 };
  const void *address;
  std::size_t elements;
  Element element;
};

// Launches `kernel` (a candidate of the template, with `candidate`'s values) once on `stream`
// with the caller's buffers. Must be repeatable: the tuner launches it many times.
using Launcher =
    std::function<void(const Kernel &kernel, const ParamValues &candidate, Stream stream)>;

struct DeviceTiming {
  int warmup = 3;  // launches before timing
  int bursts = 15; // the median of these
  // Launches per burst: enough for about this much device time (at least one), so that the
  // events' resolution and the launch gaps do not dominate short kernels.
  double burst_us = 200;
};

// A Measure for tune(): compiles (or finds) each candidate for `device` through `rt`, refuses
// one that breaks the template's shared-memory or threads rules there, runs it once on poisoned
// outputs and reads them, then times it with events (a warm-up, then the median of bursts, with
// the L2 cache flushed before each burst when the template's rules ask). Candidates are compiled
// first, batched into programs (see precompile).
Measure measure_on_device(Runtime &rt, const Device &device, const Template &tmpl, Launcher launch,
                          std::vector<TunedOutput> outputs, Stream stream = nullptr,
                          DeviceTiming timing = {});

// Compiles the candidates of `problem` for `target` into the user tier, several to a program as
// prebuild batches them, so that measuring finds them cached. A candidate that does not compile
// is left for the measurement to report. Does nothing without a user tier or in prebuilt mode.
void precompile(Runtime &rt, const TuningProblem &problem,
                const std::vector<ParamValues> &candidates, const jit::Target &target);

// ||a - b|| / ||b||, infinite when a holds a NaN or the sizes differ.
double relative_difference(const std::vector<double> &a, const std::vector<double> &b);

} // namespace kjit

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
  Params problem; // every problem parameter
};

// The combinations of `space` (completed as above) bound with `problem`, in order, and the
// reason each one the template's rules refuse on `target` was left out. Throws
// Error(bad_parameter) for a search space naming an unknown or a problem parameter, or a value
// the parameter does not allow, and when no candidate is left.
struct Candidates {
  std::vector<Params> accepted;
  std::vector<std::pair<Params, std::string>> refused;
};
Candidates tuning_candidates(const TuningProblem &problem, const SearchSpace &space,
                             std::string_view target);

// One candidate's run, from `measure`.
struct Measurement {
  double time_us = 0;         // median over the bursts
  std::vector<double> output; // what it wrote, as numbers, for the agreement check
};
using Measure = std::function<Measurement(const Params &candidate)>;

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
  std::vector<std::pair<Params, std::string>> dropped; // failed, disagreed, or refused
  std::size_t tried = 0, untried = 0;
  double seconds = 0;
};

// Throws Error(bad_parameter) for a bad search space or a budget that is not positive or that
// the first candidate overran; Error(device_error) when no candidate ran and agreed (the reasons
// in its detail).
TuneResult tune(const TuningProblem &problem, const TuneOptions &options, std::string_view target,
                const Measure &measure);

// ||a - b|| / ||b||, infinite when a holds a NaN or the sizes differ.
double relative_difference(const std::vector<double> &a, const std::vector<double> &b);

} // namespace kjit

#pragma once
// Tuning the operators (`kjit tune OP --shapes FILE`): each shape is measured on the Runtime's
// GPU with fresh random inputs, and the winner recorded in the tuning table, where the wrappers
// find it (kjit::ops::rms_norm... read the table once per shape, then launch the winner).
#include "kjit/runtime/runtime.hpp"
#include "kjit/runtime/tuner.hpp"
#include "kjit/runtime/tuning_table.hpp"

#include <string>
#include <vector>

namespace kjit::ops {

// The operators that can be tuned.
const std::vector<std::string> &tunable_operators(); // rms_norm, softmax, silu_and_mul

// One shape: `length` is the row length (hidden, cols) or silu_and_mul's d; `type` one of
// "float", "half", "bfloat16".
struct OperatorShape {
  std::string op;
  std::string type;
  int rows;
  int length;
};

// Checks `shape` and `options` without a device: Error(bad_parameter) for an unknown operator or
// type, a shape out of range, and what check_tune_options refuses.
void check_tuning(const OperatorShape &shape, const TuneOptions &options);

// The key the wrapper looks the shape up by on the Runtime's device. Throws
// Error(bad_parameter) for an unknown operator or type, or a shape out of range.
TuningKey operator_tuning_key(Runtime &rt, const OperatorShape &shape);

struct OperatorTuning {
  TuningRecord record;
  bool tuned;                       // false: the table had it (this or another process tuned it)
  std::optional<TuneResult> result; // when tuned: what was dropped and how long it took
  // When tuned: the variant the wrapper's heuristic picks for 16-byte-aligned pointers, with its
  // time from the same measurement (0 when it was not among those that ran).
  TimedVariant heuristic;
};

// The table's record for `shape`, tuned on the Runtime's GPU when there is none (once across
// processes: TuningTable::find_or_tune). `space` and the budget as in tune(). Throws
// Error(no_device), and what tune() throws.
OperatorTuning tune_operator(Runtime &rt, const TuningTable &table, const OperatorShape &shape,
                             TuneOptions options = {});

} // namespace kjit::ops

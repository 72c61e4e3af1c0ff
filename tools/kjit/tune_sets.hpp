#pragma once
// `kjit tune --sets FILE TEMPLATE --shapes SHAPES`: a library's template, as its set file declares
// it (its "tunable" parameters), tuned through the same tuner and table as the operators.
//
// SHAPES is JSON: the problems, the row counts, and how to launch the kernel:
//
//   {"problems": [{"T": "half", "HIDDEN": 4096}],      its problem parameters, each combination
//    "rows": [1, 4096],                                the extent records are keyed by
//    "launch": {"grid": "rows", "block": "THREADS",    blocks and threads per block
//               "arguments": [{"output": "rows*HIDDEN"}, {"input": "rows*HIDDEN"}, "rows", 1e-6]}}
//
// A size is an integer or a product (`*`) or ceiling quotient (`/`) of integers, "rows" and the
// candidate's integer parameters. "arguments" gives one item per argument the template declares
// ("arguments" in the set): a pointer takes {"input": SIZE} (random values) or {"output": SIZE}
// (what candidates are compared on), SIZE elements of the template's T (float, half or bfloat16);
// a scalar takes a number or a size.
#include "kjit/runtime/tuner.hpp"
#include "tune_command.hpp"

#include <string>
#include <vector>

namespace kjit::cli {

// --space NAME=V1,V2 as a search space: integers where they parse whole, type names otherwise.
SearchSpace read_space(const std::vector<std::string> &items);

// Throws Error(no_device), "cannot tune: ...", unless `rt` finds a GPU.
void require_device(Runtime &rt);

// Exit status 0; 3 without a GPU. Throws kjit::Error for bad input (a set, template, shapes file or
// search space), checked before a GPU is looked for.
int tune_set_template(const TuneArgs &args, bool as_json);

} // namespace kjit::cli

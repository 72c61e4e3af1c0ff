#pragma once
// `kjit tune`: tune the built-in operators on the GPU found, and manage the tuning table
// (kjit/runtime/tuning_table.hpp).
//
//   kjit tune OP --shapes FILE [--budget S] [--space NAME=V1,V2...]...
//                                            OP: rms_norm, softmax, silu_and_mul
//   kjit tune --sets FILE TEMPLATE --shapes FILE ...   a library's template (tune_sets.hpp)
//   kjit tune ls | show KEY-PREFIX | export FILE [--csv] | import FILE
//
// A shapes file is JSON: {"types": ["bfloat16"], "rows": [1, 64], "lengths": [4096, 16384]},
// every combination (lengths: the row length, or silu_and_mul's d).
#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace kjit::cli {

struct TuneArgs {
  std::string op;
  std::string shapes;
  std::string sets; // --sets FILE: op names a template of that set file (tune_sets.hpp)
  double budget_s = 60;
  std::vector<std::string> space; // NAME=V1,V2: the values to try of a tunable parameter
  std::string key_prefix;         // show
  std::string file;               // export, import
  bool csv = false;               // export
};

CLI::App *add_tune_command(CLI::App &app, TuneArgs &args, bool &as_json);

// Exit status: 0; 3 when there is no GPU to tune on (said on stderr). Throws kjit::Error for bad
// input (the caller prints it and exits 2), checked before looking for a GPU.
int run_tune(const CLI::App &tune, const TuneArgs &args, bool as_json);

// `kjit tune OP --shapes FILE ...` itself, writing its table or (with `as_json`) its JSON document
// to `out`: for callers without a command line, kjit/c.h's kjit_tune. Throws kjit::Error
// (no_device where there is no GPU).
int tune_shapes(const TuneArgs &args, bool as_json, std::ostream &out);

} // namespace kjit::cli

#pragma once
// `kjit cache explain TEMPLATE -p K=V ... --target T`: why that variant would compile, or where a
// lookup would find it (Runtime::explain; docs/ARCHITECTURE.md, "Why did it compile?").
#include <ostream>
#include <string>
#include <vector>

namespace kjit::cli {

struct ExplainArgs {
  std::string template_name;
  std::vector<std::string> params; // NAME=VALUE
  std::string target;
  std::string sets_file; // the template as this set file declares it
};

// Writes the explanation to `out`; exit status 0 whether or not the variant is found. Throws Error
// for bad input (a template, parameter or target), as `kjit compile` does.
int run_explain(const ExplainArgs &args, bool as_json, std::ostream &out);

} // namespace kjit::cli

#pragma once
// A template and its parameters as a command line names them: `kjit compile` and `kjit cache
// explain` read them alike.
#include "kjit/kjit.hpp"
#include "kjit/templates/sets.hpp"

#include <string>
#include <vector>

namespace kjit::cli {

// `-p NAME=VALUE` items, in order: a value that reads as a whole integer is an integer, anything
// else names a type. Throws Error(bad_usage) for an item without a name and '=', and
// Error(bad_parameter) for a name given twice.
ParamValues parse_params(const std::vector<std::string> &items);

// The template `name` as the set file declares it (its parameters checked by name, its headers
// and options the set's), else a built-in one. Throws Error(bad_parameter) naming the set's
// templates when neither has it.
const Template &template_from_set(const templates::VariantSet &set, const std::string &name);

} // namespace kjit::cli

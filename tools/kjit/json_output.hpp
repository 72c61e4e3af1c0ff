#pragma once
// Every command's --json output: one JSON document on stdout (README.md, "The command line").
#include <iostream>
#include <nlohmann/json.hpp>

namespace kjit::cli {

// `out` is std::cout for the command line, a string stream for the C ABI's kjit_cache_*,
// kjit_tune and kjit_prebuild, which return the same documents.
inline void print_json(std::ostream &out, const nlohmann::json &value) {
  out << value.dump(2) << '\n';
}
inline void print_json(const nlohmann::json &value) { print_json(std::cout, value); }

} // namespace kjit::cli

#pragma once
// Every command's --json output: one JSON document on stdout (README.md, "The command line").
#include <iostream>
#include <nlohmann/json.hpp>

namespace kjit::cli {

inline void print_json(const nlohmann::json &value) { std::cout << value.dump(2) << '\n'; }

} // namespace kjit::cli

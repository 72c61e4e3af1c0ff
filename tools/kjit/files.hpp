#pragma once
// Reading the files the commands are given.
#include "kjit/error.hpp"

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace kjit::cli {

// The whole file at `path`; throws Error(file_io) "cannot read <what> <path>".
inline std::string read_text_file(const std::string &path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(Errc::file_io, "cannot read " + std::string(what) + " " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

} // namespace kjit::cli

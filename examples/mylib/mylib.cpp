#include "mylib.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mylib {
namespace {

std::string read(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw kjit::Error(kjit::Errc::file_io, "mylib: cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const std::filesystem::path kernels = MYLIB_KERNEL_DIR;

kjit::ParamSchema element_types() { return kjit::ParamSchema::type({"float", "half", "bfloat16"}); }

} // namespace

kjit::Config config() {
  kjit::Config config = kjit::Config::from_environment();
  config.prebuilt_dirs.push_back(MYLIB_PREBUILT_DIR);
  return config;
}

const kjit::Template &axpby() {
  static const kjit::Template tmpl{
      "mylib_axpby",
      read(kernels / "axpby.hip"),
      {{"T", element_types()}, {"N", kjit::ParamSchema::integer(1, 1 << 24)}},
      {.arguments = {"T*", "const T*", "float", "float"}}};
  return tmpl;
}

const kjit::Template &rms_norm() {
  // As kernels.json declares it: every file under kernels/include, named by its path there.
  static const kjit::Template tmpl{
      "mylib_rms_norm",
      read(kernels / "norm.hip"),
      {{"T", element_types()}, {"HIDDEN", kjit::ParamSchema::integer(1, 1 << 16)}},
      {.headers = {{"mylib/math.h", read(kernels / "include/mylib/math.h")}},
       .compile_options = {"-DMYLIB_EPS=1e-6f"},
       .arguments = {"T*", "const T*", "int"}}};
  return tmpl;
}

} // namespace mylib

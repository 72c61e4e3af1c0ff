#include "mylib.hpp"

#include "mylib_kernels.hpp" // kjit_embed_sources(): the files kernels.json names, embedded

namespace mylib {
namespace {

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
      kernels::source("axpby.hip"),
      {{"T", element_types()}, {"N", kjit::ParamSchema::integer(1, 1 << 24)}},
      {.source_name = kernels::source_name("axpby.hip"), // "kernels/axpby.hip", as in kernels.json
       .arguments = {"T*", "const T*", "float", "float"}}};
  return tmpl;
}

const kjit::Template &rms_norm() {
  // As kernels.json declares it: every file under kernels/include, named by its path there.
  static const kjit::Template tmpl{
      "mylib_rms_norm",
      kernels::source("norm.hip"),
      {{"T", element_types()}, {"HIDDEN", kjit::ParamSchema::integer(1, 1 << 16)}},
      {.source_name = kernels::source_name("norm.hip"),
       .headers = kernels::headers("include"),
       .compile_options = {"-DMYLIB_EPS=1e-6f"},
       .arguments = {"T*", "const T*", "int"}}};
  return tmpl;
}

} // namespace mylib

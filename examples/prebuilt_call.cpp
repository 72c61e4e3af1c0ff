// A user's program in production: KJIT_MODE=prebuilt, its variants prebuilt by kjit_prebuild()
// (examples/CMakeLists.txt), found without compiling, or an error naming what to prebuild.
//
//   KJIT_MODE=prebuilt KJIT_PREBUILT_DIR=<build>/example_kernels-prebuilt prebuilt_call [TARGET]
#include <kjit/kjit.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>

int main(int argc, char **argv) try {
  std::ifstream file(KERNEL_SOURCE);
  std::stringstream source;
  source << file.rdbuf();
  // As the set file declares it: a template from a source file, parameters in the order listed,
  // its source named as the set names it (the compiler's log names it so; part of the key).
  const kjit::Template add_one{
      "add_one",
      source.str(),
      {{"T", kjit::ParamSchema::type({"float", "int"})},
       {"N", kjit::ParamSchema::one_of({256, 4096})}},
      {.kernel = "add_one", .source_name = "kernels/add_one.hip", .arguments = {"T*"}}};
  const auto target = kjit::Target::parse(argc > 1 ? argv[1] : "gfx90a");
  kjit::Runtime rt;
  for (const char *type : {"float", "int"})
    for (int n : {256, 4096}) {
      const kjit::CodeObject &code = rt.compile(add_one, {{"T", type}, {"N", n}}, target);
      std::printf("%-24s %s\n", code.expression().c_str(),
                  std::string(kjit::to_string(code.origin())).c_str());
    }
  return 0;
} catch (const kjit::Error &error) {
  std::fprintf(stderr, "prebuilt_call: %s\n", error.what());
  return 2;
}

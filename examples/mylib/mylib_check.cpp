// mylib in production: KJIT_MODE=prebuilt, its own variants in its installed tier and kjit's
// built-in ones in kjit's tier (installed elsewhere, KJIT_PREBUILT_DIR). Asks for every variant
// mylib prebuilt, for each target given, and one of kjit's, and fails unless each is found in
// its tier and nothing was compiled.
//
//   KJIT_MODE=prebuilt KJIT_PREBUILT_DIR=<kjit prefix>/share/kjit/prebuilt mylib_check TARGET...
#include "mylib.hpp"

#include <kjit/templates/library.hpp>

#include <cstdio>
#include <string>

namespace {

int wrong = 0;

// Asks for one variant and says which tier answered; anything but a hit under `tier` is wrong.
void expect_in(kjit::Runtime &rt, const kjit::Template &tmpl, const kjit::ParamValues &params,
               const kjit::Target &target, const std::string &tier) {
  const kjit::CodeObject &code = rt.compile(tmpl, params, target);
  const bool found =
      code.origin() == kjit::Origin::prebuilt && code.entry_path().string().rfind(tier, 0) == 0;
  wrong += !found;
  std::printf("%-40s %-8s %s %s\n", code.expression().c_str(), target.id().c_str(),
              std::string(kjit::to_string(code.origin())).c_str(),
              found ? "" : ("NOT IN " + tier).c_str());
}

} // namespace

int main(int argc, char **argv) try {
  if (argc < 2) {
    std::fprintf(stderr, "usage: mylib_check TARGET...\n");
    return 2;
  }
  const kjit::Config config = mylib::config();
  const std::string mylib_tier = config.prebuilt_dirs.back().string();
  kjit::Runtime rt(config);
  for (int i = 1; i < argc; ++i) {
    const kjit::Target target = kjit::Target::parse(argv[i]);
    for (const char *type : {"float", "half"})
      for (int n : {1024, 4096})
        expect_in(rt, mylib::axpby(), {{"T", type}, {"N", n}}, target, mylib_tier);
    for (const char *type : {"half", "bfloat16"})
      for (int hidden : {2048, 4096})
        expect_in(rt, mylib::rms_norm(), {{"T", type}, {"HIDDEN", hidden}}, target, mylib_tier);
  }
  // One of kjit's own minimal set, from kjit's tier (installed for the first target).
  expect_in(rt, kjit::templates::find("scale"), {{"T", "half"}, {"N", 4096}},
            kjit::Target::parse(argv[1]), config.prebuilt_dir.string());
  const std::uint64_t compiled = rt.counters().compiled;
  std::printf("mylib_check: %d wrong, %llu compiled\n", wrong,
              static_cast<unsigned long long>(compiled));
  return wrong == 0 && compiled == 0 ? 0 : 1;
} catch (const kjit::Error &error) {
  std::fprintf(stderr, "mylib_check: %s\n", error.what());
  return 1;
}

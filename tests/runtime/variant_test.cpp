// The key covers every input that can change the code (docs/ARCHITECTURE.md, "The key"): changing
// any one of them changes the key, and nothing else does.
#include "fake_compiler.hpp"
#include "runtime/src/variant.hpp"

#include <gtest/gtest.h>

namespace kjit {
namespace {

using testing::FakeCompiler;

struct Inputs {
  std::string source = "template <typename T, int N> __global__ void scale(T*) {}";
  std::vector<HeaderFile> headers = {{"helper.h", "#define HELPER 1"}};
  std::vector<std::string> options = {"-O3"};
  ParamValues params = {{"T", "half"}, {"N", 4096}};
  std::string target = "gfx90a:sramecc+:xnack-";
  std::string compiler_identity = "hiprtc 9.0, HIP 5.2.21153, comgr 2.4";
  std::vector<std::pair<std::string, std::string>> environment;
  std::string source_name; // TemplateOptions::source_name
};

cache::Key key_of(const Inputs &in) {
  const Template tmpl(
      "scale", in.source,
      {{"T", ParamSchema::type({"float", "half"})}, {"N", ParamSchema::integer(1, 1 << 20)}},
      {.source_name = in.source_name, .headers = in.headers, .compile_options = in.options});
  const FakeCompiler compiler(in.compiler_identity, in.environment);
  return describe_variant(tmpl.bind(in.params), jit::Target::parse(in.target),
                          CompilerIdentity::of(compiler))
      .key;
}

TEST(VariantKey, IsStableForTheSameInputs) {
  EXPECT_EQ(key_of({}), key_of({}));
  Inputs reordered;
  reordered.params = {{"N", 4096}, {"T", "half"}};
  EXPECT_EQ(key_of(reordered), key_of({})) << "parameter order is not an input";
  Inputs spelled;
  spelled.target = "gfx90a:xnack-:sramecc+";
  EXPECT_EQ(key_of(spelled), key_of({})) << "feature order is not an input";
  Inputs named;
  named.source_name = "scale.hip";
  EXPECT_EQ(key_of(named), key_of({})) << "the default source name, spelled, is the same name";
}

TEST(VariantKey, ChangesWithEveryInput) {
  const cache::Key base = key_of({});
  std::vector<std::pair<std::string, Inputs>> changed(10);
  changed[0].first = "source";
  changed[0].second.source += " ";
  changed[1].first = "header";
  changed[1].second.headers[0].content = "#define HELPER 2";
  changed[2].first = "type parameter";
  changed[2].second.params = {{"T", "float"}, {"N", 4096}};
  changed[3].first = "integer parameter";
  changed[3].second.params = {{"T", "half"}, {"N", 4097}};
  changed[4].first = "option";
  changed[4].second.options = {"-O2"};
  changed[5].first = "target";
  changed[5].second.target = "gfx908";
  changed[6].first = "feature flag";
  changed[6].second.target = "gfx90a:sramecc+:xnack+";
  changed[7].first = "compiler version";
  changed[7].second.compiler_identity = "hiprtc 9.0, HIP 5.2.21154, comgr 2.4";
  changed[8].first = "environment";
  changed[8].second.environment = {{"HIPRTC_COMPILE_OPTIONS_APPEND", "-O0"}};
  changed[9].first = "source name"; // __FILE__ and line tables carry it into the code
  changed[9].second.source_name = "kernels/scale.hip";
  for (const auto &[what, inputs] : changed)
    EXPECT_NE(key_of(inputs), base) << "changing the " << what << " must change the key";
}

TEST(VariantKey, ThePreludeIsAHashedHeader) {
  const Template tmpl("t", "", {});
  const FakeCompiler compiler;
  const VariantDescription variant =
      describe_variant(tmpl.bind({}), jit::Target::parse("gfx90a"), CompilerIdentity::of(compiler));
  bool prelude_hashed = false;
  for (const auto &[name, value] : variant.key_inputs.fields())
    prelude_hashed |= name == "header:kjit/prelude.h" && value.size() == 64;
  EXPECT_TRUE(prelude_hashed);
  EXPECT_EQ(variant.request.pre_includes, std::vector<std::string>{"kjit/prelude.h"});
}

TEST(VariantKey, WarpSizeComesFromTheTarget) {
  EXPECT_EQ(jit::Target::parse("gfx90a").warp_size(), 64);
  EXPECT_EQ(jit::Target::parse("gfx908").warp_size(), 64);
  EXPECT_EQ(jit::Target::parse("gfx1030").warp_size(), 32);
  EXPECT_EQ(jit::Target::parse("sm_90").warp_size(), 32);
  const Template tmpl("t", "", {});
  const FakeCompiler compiler;
  const auto options =
      describe_variant(tmpl.bind({}), jit::Target::parse("gfx1030"), CompilerIdentity::of(compiler))
          .request.options;
  EXPECT_NE(std::find(options.begin(), options.end(), "-DKJIT_WARP_SIZE=32"), options.end());
}

} // namespace
} // namespace kjit

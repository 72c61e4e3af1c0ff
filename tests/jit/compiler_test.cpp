// Behaviour every compiler owes its caller, checked against each installed one.
#include "compiler_fixture.hpp"
#include "compiler_releases.hpp"

namespace kjit::jit {
namespace {

template <typename Traits> class AnyCompilerTest : public CompilerTest<Traits::vendor> {
protected:
  static std::string program(const std::string &stem) {
    return stem + std::string(Traits::extension);
  }
  // A request for the suite's target.
  static CompileRequest request_for(const std::string &stem, std::string source,
                                    std::vector<HeaderFile> headers = {},
                                    std::vector<std::string> pre_includes = {}) {
    return AnyCompilerTest::request(program(stem), std::move(source), Traits::target, {},
                                    std::move(headers), std::move(pre_includes));
  }
};

using Compilers = ::testing::Types<HiprtcTraits, NvrtcTraits>;
class CompilerNames {
public:
  template <typename Traits> static std::string GetName(int) {
    return Traits::vendor == Vendor::amd ? "hiprtc" : "nvrtc";
  }
};
TYPED_TEST_SUITE(AnyCompilerTest, Compilers, CompilerNames);

// The known-releases table that unsupported-target errors quote was read from the compilers
// themselves; the loaded one must still list exactly its row, or the table has drifted.
TYPED_TEST(AnyCompilerTest, KnownReleaseRowIsWhatTheCompilerLists) {
  const std::string release = this->compiler().release();
  const std::vector<std::string> row = known_release_archs(TypeParam::vendor, release);
  if (row.empty())
    GTEST_SKIP() << release << " has no row in jit/src/compiler_releases.cpp; add one from "
                 << "`kjit targets --json`";
  std::vector<std::string> listed;
  for (const TargetSupport &target : this->compiler().supported_targets())
    listed.push_back(target.arch);
  EXPECT_EQ(listed, row) << release;
}

const std::string broken_on_line_3 = "// line 1\n"
                                     "extern \"C\" __global__ void broken(float* x) {\n"
                                     "  x[0] = undefined_variable;\n"
                                     "}\n";

TYPED_TEST(AnyCompilerTest, CompileErrorShowsTheLogAndTheNumberedSourceLine) {
  std::string program = this->program("broken");
  Error error = this->error_from(
      [&] { this->compiler().compile(this->request_for("broken", broken_on_line_3)); });
  EXPECT_EQ(error.code(), Errc::compile_error);
  EXPECT_EQ(error.summary(),
            program + ": compilation for " + std::string(TypeParam::target) + " failed (1 error)");
  EXPECT_NE(error.detail().find(TypeParam::location(program, 3)), std::string::npos)
      << error.detail();
  EXPECT_NE(error.detail().find("undefined_variable"), std::string::npos) << error.detail();
  EXPECT_NE(error.detail().find(program + ":3:\n  1 | // line 1\n"), std::string::npos)
      << error.detail();
  EXPECT_NE(error.detail().find("> 3 |   x[0] = undefined_variable;"), std::string::npos)
      << error.detail();
}

// A library's source is named by its path (TemplateOptions::source_name): the log and the
// excerpt name that file, folders and all, and the compiler takes a name with folders.
TYPED_TEST(AnyCompilerTest, ASourceNamedByItsPathIsNamedSoInTheLog) {
  const std::string program = "kernels/broken" + std::string(TypeParam::extension);
  Error error = this->error_from([&] {
    this->compiler().compile(this->request(program, broken_on_line_3, TypeParam::target));
  });
  EXPECT_EQ(error.code(), Errc::compile_error);
  EXPECT_EQ(error.summary(),
            program + ": compilation for " + std::string(TypeParam::target) + " failed (1 error)");
  EXPECT_NE(error.detail().find(TypeParam::location(program, 3)), std::string::npos)
      << error.detail();
  EXPECT_NE(error.detail().find(program + ":3:\n"), std::string::npos) << error.detail();

  std::string fixed = broken_on_line_3;
  fixed.replace(fixed.find("undefined_variable"), std::string("undefined_variable").size(), "1");
  EXPECT_TRUE(
      read_elf(this->compiler().compile(this->request(program, fixed, TypeParam::target)).code));
}

TYPED_TEST(AnyCompilerTest, PreIncludesComeFirstAndKeepTheSourceLineNumbers) {
  std::vector<HeaderFile> headers{{"kjit/prelude.h", "#define KJIT_FLOAT float\n"}};
  std::string source = "// line 1\n"
                       "extern \"C\" __global__ void broken(KJIT_FLOAT* x) {\n"
                       "  x[0] = undefined_variable;\n"
                       "}\n";
  std::string program = this->program("broken");
  Error error = this->error_from([&] {
    this->compiler().compile(this->request_for("broken", source, headers, {"kjit/prelude.h"}));
  });
  EXPECT_EQ(error.code(), Errc::compile_error);
  EXPECT_NE(error.detail().find(TypeParam::location(program, 3)), std::string::npos)
      << error.detail();
  EXPECT_NE(error.detail().find("> 3 |   x[0] = undefined_variable;"), std::string::npos)
      << error.detail();

  // The same source without its error compiles: the pre-include defined KJIT_FLOAT.
  source.replace(source.find("undefined_variable"), std::string("undefined_variable").size(), "1");
  CompileResult result =
      this->compiler().compile(this->request_for("fixed", source, headers, {"kjit/prelude.h"}));
  EXPECT_TRUE(read_elf(result.code));
}

TYPED_TEST(AnyCompilerTest, MissingPreIncludeIsNotBlamedOnTheSource) {
  Error error = this->error_from([&] {
    this->compiler().compile(this->request_for("k", "extern \"C\" __global__ void k(int* x) {}\n",
                                               {}, {"kjit/missing.h"}));
  });
  EXPECT_EQ(error.code(), Errc::compile_error);
  EXPECT_NE(error.detail().find("<kjit pre-includes>"), std::string::npos) << error.detail();
  EXPECT_NE(error.detail().find("kjit/missing.h"), std::string::npos) << error.detail();
  EXPECT_EQ(error.detail().find("> 1 |"), std::string::npos) << error.detail();
}

TYPED_TEST(AnyCompilerTest, ErrorInAHeaderShowsTheHeaderLine) {
  std::vector<HeaderFile> headers{{"kjit/util.h", "#pragma once\n\nflaot broken_value;\n"}};
  std::string source = "#include <kjit/util.h>\nextern \"C\" __global__ void k(float* x) {}\n";
  Error error =
      this->error_from([&] { this->compiler().compile(this->request_for("k", source, headers)); });
  EXPECT_EQ(error.code(), Errc::compile_error);
  EXPECT_NE(error.detail().find(TypeParam::location("kjit/util.h", 3)), std::string::npos)
      << error.detail();
  EXPECT_NE(error.detail().find("> 3 | flaot broken_value;"), std::string::npos) << error.detail();
}

TYPED_TEST(AnyCompilerTest, HeadersAreIncludableByTheirNameEvenWhenEmpty) {
  std::vector<HeaderFile> headers{{"kjit/scale.h", "#define KJIT_SCALE 3\n"}, {"empty.h", ""}};
  std::string source = "#include <kjit/scale.h>\n#include \"empty.h\"\n"
                       "extern \"C\" __global__ void k(int* x) { x[0] = KJIT_SCALE; }\n";
  CompileResult result = this->compiler().compile(this->request_for("k", source, headers));
  std::optional<ElfSummary> elf = read_elf(result.code);
  ASSERT_TRUE(elf);
  EXPECT_TRUE(this->contains(elf->symbols, "k") || this->contains(elf->symbols, "k.kd"));
}

TYPED_TEST(AnyCompilerTest, OptionsKjitOwnsNeverReachTheCompiler) {
  CompileRequest with_include = this->request_for("k", broken_on_line_3);
  with_include.options = {"-I/usr/include"};
  EXPECT_EQ(this->error_from([&] { this->compiler().compile(with_include); }).code(),
            Errc::bad_option);
}

TYPED_TEST(AnyCompilerTest, MacroOptionsChangeTheCode) {
  CompileRequest one =
      this->request_for("k", "extern \"C\" __global__ void k(int* x) { x[0] = VALUE; }\n");
  one.options = {"-DVALUE=1"};
  CompileRequest two = one;
  two.options = {"-D", "VALUE=2"};
  EXPECT_NE(this->compiler().compile(one).code, this->compiler().compile(two).code);
}

TYPED_TEST(AnyCompilerTest, SuccessfulCompileIsReproducible) {
  CompileRequest request =
      this->request_for("k", "extern \"C\" __global__ void k(int* x) { x[0] = 7; }\n");
  EXPECT_EQ(this->compiler().compile(request).code, this->compiler().compile(request).code);
}

} // namespace
} // namespace kjit::jit

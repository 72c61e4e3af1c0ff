#include "kjit/error.hpp"
#include "kjit/jit/options.hpp"

#include <gtest/gtest.h>

namespace kjit::jit {
namespace {

using Options = std::vector<std::string>;

Options canonical(const Options &options) { return canonicalize_options(options); }

TEST(CanonicalizeOptions, TrimsWhitespaceAndDropsEmptyItems) {
  EXPECT_EQ(canonical({"  -O3\t", "", "   ", "-ffast-math\n"}), (Options{"-O3", "-ffast-math"}));
}

TEST(CanonicalizeOptions, JoinsSeparatedMacroDefinitions) {
  EXPECT_EQ(canonical({"-D", "WARP=64"}), (Options{"-DWARP=64"}));
  EXPECT_EQ(canonical({"-D WARP=64"}), (Options{"-DWARP=64"}));
  EXPECT_EQ(canonical({"-U", "NDEBUG"}), (Options{"-UNDEBUG"}));
}

TEST(CanonicalizeOptions, SortsMacrosAndPutsThemFirst) {
  EXPECT_EQ(canonical({"-O3", "-UC", "-DB=2", "-DA=1"}), (Options{"-DA=1", "-DB=2", "-UC", "-O3"}));
}

TEST(CanonicalizeOptions, EquivalentSpellingsGiveOneList) {
  Options one = canonical({"-DA=1", "-O2", "-D", "B", "-ffast-math"});
  Options other = canonical({" -D B ", "-O2", "-ffast-math", "-DA=1", "-DB"});
  EXPECT_EQ(one, other);
}

TEST(CanonicalizeOptions, DropsRepeatedIdenticalMacros) {
  EXPECT_EQ(canonical({"-DA=1", "-DA=1", "-D", "A=1"}), (Options{"-DA=1"}));
}

TEST(CanonicalizeOptions, KeepsTheOrderOfOtherOptions) {
  // A later -O wins over an earlier one, so their order is part of the meaning.
  EXPECT_EQ(canonical({"-O3", "-O0"}), (Options{"-O3", "-O0"}));
  EXPECT_NE(canonical({"-O3", "-O0"}), canonical({"-O0", "-O3"}));
}

TEST(CanonicalizeOptions, PassesTheArgumentOfMllvmThroughUntouched) {
  EXPECT_EQ(canonical({"-mllvm", "-amdgpu-early-inline-all=true", "-DA"}),
            (Options{"-DA", "-mllvm", "-amdgpu-early-inline-all=true"}));
  // "-D..." after -Xclang is clang's argument, not a macro of ours.
  EXPECT_EQ(canonical({"-Xclang", "-DX"}), (Options{"-Xclang", "-DX"}));
}

TEST(CanonicalizeOptions, IsIdempotent) {
  Options once = canonical({"-O3", "-D", "B=2", "-DA", "-UC", "-ffast-math"});
  EXPECT_EQ(canonical(once), once);
}

void expect_refused(const Options &options, const std::string &text_in_message) {
  try {
    canonicalize_options(options);
    ADD_FAILURE() << "accepted " << ::testing::PrintToString(options);
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_option);
    EXPECT_NE(std::string(error.what()).find(text_in_message), std::string::npos) << error.what();
  }
}

TEST(CanonicalizeOptions, RefusesConflictingDefinitionsOfOneMacro) {
  expect_refused({"-DN=1", "-DN=2"}, "both set macro N");
  expect_refused({"-DN", "-UN"}, "both set macro N");
  expect_refused({"-UN", "-D", "N=3"}, "both set macro N");
}

TEST(CanonicalizeOptions, RefusesMacroOptionsWithoutAName) {
  expect_refused({"-D"}, "names no macro");
  expect_refused({"-D", ""}, "names no macro");
  expect_refused({"-D=1"}, "names no macro");
  expect_refused({"-U"}, "names no macro");
  expect_refused({"-D", "-O3"}, "names no macro");
}

TEST(CanonicalizeOptions, RefusesTargetSelection) {
  for (const char *option :
       {"--gpu-architecture=sm_90", "--gpu-architecture", "-arch=sm_90", "-arch",
        "--offload-arch=gfx90a", "--cuda-gpu-arch=sm_90", "-mcpu=gfx90a", "--mcpu=gfx90a",
        "-march=gfx90a", "--target=amdgcn-amd-amdhsa", "-target", "-mxnack", "-mno-xnack",
        "-msramecc", "-mno-sramecc", "-mwavefrontsize64"})
    expect_refused({option}, "selects the target");
}

TEST(CanonicalizeOptions, RefusesIncludePaths) {
  for (const char *option :
       {"-I/usr/include", "-I", "-isystem/opt/x", "-isystem", "-iquote.", "-idirafter/x",
        "--include-path=/x", "-include", "-includefoo.h", "--pre-include=foo.h",
        // Each of these slipped past the refusal list that came before the allow-list.
        "--include-directory=/x", "--include-directory-after=/x", "-Wp,-I/x", "-cxx-isystem/x",
        "--include=/x/h.h", "-imacros", "-imacros/x/h.h", "--embed-dir=/x", "--sysroot=/x"})
    expect_refused({option}, "pass headers as Headers");
}

TEST(CanonicalizeOptions, RefusesWhatMllvmOrXclangWouldSmuggleIn) {
  expect_refused({"-Xclang", "-I/opt/include"}, "pass headers as Headers");
  expect_refused({"-Xclang", "-include-pch"}, "pass headers as Headers");
  expect_refused({"-Xclang", "-load"}, "not among the options");
  expect_refused({"-mllvm", "-march=gfx90a"}, "LLVM option");
  expect_refused({"-mllvm", "-sample-profile-file=prof.txt"}, "LLVM option");
  expect_refused({"-mllvm", "-x=/tmp/y"}, "LLVM option");
  expect_refused({"-mllvm"}, "needs an argument");
  expect_refused({"-O3", "-Xclang"}, "needs an argument");
}

TEST(CanonicalizeOptions, RefusesOutputAndPreprocessingModes) {
  for (const char *option : {"-o", "-E", "-c", "-S", "-fsyntax-only", "--fdevice-syntax-only", "-M",
                             "-MD", "-MF", "-fgpu-rdc", "--relocatable-device-code=true"})
    expect_refused({option}, "needs one code object");
}

TEST(CanonicalizeOptions, RefusesWhatIsNotKnownToBeSafe) {
  for (const char *option :
       {"-fplugin=/x.so", "--time=/tmp/t", "-ftime-trace", "-x", "hip", "-std=c++17/../x",
        "-ffp-contract=maybe", "--ftz=yes", "--maxrregcount=lots", "-Wa,-x", "-Wl,-rpath", "-B/x",
        "-nostdinc", "--ptxas-options=--options-file=/x", "-opt-info=everything"})
    expect_refused({option}, "not among the options");
}

TEST(CanonicalizeOptions, AcceptsTheOptionsOnTheList) {
  const Options allowed = {"-O0",
                           "-O2",
                           "-O3",
                           "-ffast-math",
                           "-fno-fast-math",
                           "-ffp-contract=fast",
                           "-std=c++17",
                           "--std=c++20",
                           "-std=gnu++17",
                           "-Wall",
                           "-Wno-unused-variable",
                           "-Werror=shadow",
                           "-w",
                           "-g",
                           "-gline-tables-only",
                           "-save-temps",
                           "-munsafe-fp-atomics",
                           "-mcumode",
                           "-fgpu-flush-denormals-to-zero",
                           "--use_fast_math",
                           "--ftz=true",
                           "--prec-div=false",
                           "-fmad=true",
                           "--maxrregcount=128",
                           "-opt-info=inline",
                           "--optimization-info=inline",
                           "-lineinfo",
                           "--diag-suppress=177,550",
                           "--ptxas-options=-v,--warn-on-spills",
                           "--extra-device-vectorization",
                           "--restrict",
                           "--device-int128"};
  EXPECT_EQ(canonical(allowed), allowed);
  EXPECT_EQ(canonical({"-mllvm", "-unroll-threshold=200", "-Xclang", "-O3"}),
            (Options{"-mllvm", "-unroll-threshold=200", "-Xclang", "-O3"}));
}

} // namespace
} // namespace kjit::jit

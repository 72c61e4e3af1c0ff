#include "compile_log.hpp"

#include <gtest/gtest.h>

namespace kjit::jit {
namespace {

// The clang style "file:line:col: error:" that hiprtc's log uses.
const std::regex clang_style(R"(^([^:]+):(\d+):\d+: (?:fatal )?error:)");

const std::string source = "// one\n"
                           "// two\n"
                           "int three = oops;\n"
                           "// four\n"
                           "// five\n"
                           "// six\n"
                           "// seven\n";

TEST(AnnotateCompileLog, KeepsTheLogAndAddsNumberedLinesAroundTheError) {
  std::string log = "k.hip:3:13: error: use of undeclared identifier 'oops'\n";
  std::vector<SourceFile> files{{"k.hip", source}};
  AnnotatedLog annotated = annotate_compile_log(log, files, clang_style);
  EXPECT_EQ(annotated.error_count, 1u);
  EXPECT_EQ(annotated.text, log + "\nSource around each error:\n"
                                  "\n"
                                  "k.hip:3:\n"
                                  "  1 | // one\n"
                                  "  2 | // two\n"
                                  "> 3 | int three = oops;\n"
                                  "  4 | // four\n"
                                  "  5 | // five\n");
}

TEST(AnnotateCompileLog, ExcerptStopsAtTheEndsOfTheFile) {
  std::string log = "k.hip:1:1: error: a\nk.hip:7:1: error: b\n";
  std::vector<SourceFile> files{{"k.hip", source}};
  AnnotatedLog annotated = annotate_compile_log(log, files, clang_style);
  EXPECT_EQ(annotated.error_count, 2u);
  EXPECT_NE(
      annotated.text.find("k.hip:1:\n> 1 | // one\n  2 | // two\n  3 | int three = oops;\n\n"),
      std::string::npos)
      << annotated.text;
  EXPECT_NE(annotated.text.find("k.hip:7:\n  5 | // five\n  6 | // six\n> 7 | // seven\n"),
            std::string::npos)
      << annotated.text;
}

TEST(AnnotateCompileLog, WidensLineNumbersToTheLongestShown) {
  std::string long_source;
  for (int line = 1; line <= 12; ++line)
    long_source += "line " + std::to_string(line) + "\n";
  std::vector<SourceFile> files{{"k.hip", long_source}};
  AnnotatedLog annotated = annotate_compile_log("k.hip:9:1: error: x\n", files, clang_style);
  EXPECT_NE(annotated.text.find("   7 | line 7\n   8 | line 8\n>  9 | line 9\n  10 | line 10\n"),
            std::string::npos)
      << annotated.text;
}

TEST(AnnotateCompileLog, FindsErrorsInHeadersByTheirName) {
  std::string log = "In file included from k.hip:1:\n"
                    "util.h:2:5: error: unknown type name 'flaot'\n";
  std::vector<SourceFile> files{{"k.hip", "#include \"util.h\"\n"},
                                {"util.h", "#pragma once\nint flaot x;\n"}};
  AnnotatedLog annotated = annotate_compile_log(log, files, clang_style);
  EXPECT_EQ(annotated.error_count, 1u);
  EXPECT_NE(annotated.text.find("util.h:2:\n  1 | #pragma once\n> 2 | int flaot x;\n"),
            std::string::npos)
      << annotated.text;
}

TEST(AnnotateCompileLog, CountsErrorsInUnknownFilesWithoutAnExcerpt) {
  std::string log = "/usr/include/stdio.h:10:1: error: x\n";
  std::vector<SourceFile> files{{"k.hip", source}};
  AnnotatedLog annotated = annotate_compile_log(log, files, clang_style);
  EXPECT_EQ(annotated.error_count, 1u);
  EXPECT_EQ(annotated.text, log);
}

TEST(AnnotateCompileLog, SaysWhenTheLineIsPastTheEndOfTheFile) {
  std::vector<SourceFile> files{{"k.hip", source}};
  AnnotatedLog annotated = annotate_compile_log("k.hip:9:1: error: x", files, clang_style);
  EXPECT_NE(annotated.text.find("k.hip:9:\n  (past the end of k.hip, which has 7 lines"),
            std::string::npos)
      << annotated.text;
}

TEST(AnnotateCompileLog, ShowsEachLocationOnce) {
  std::string log = "k.hip:3:1: error: a\nk.hip:3:9: error: b\n";
  std::vector<SourceFile> files{{"k.hip", source}};
  AnnotatedLog annotated = annotate_compile_log(log, files, clang_style);
  EXPECT_EQ(annotated.error_count, 2u);
  std::size_t first = annotated.text.find("> 3 |");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(annotated.text.find("> 3 |", first + 1), std::string::npos) << annotated.text;
}

TEST(AnnotateCompileLog, IgnoresWarningsAndNotes) {
  std::string log = "k.hip:3:1: warning: w\nk.hip:3:1: note: n\n";
  std::vector<SourceFile> files{{"k.hip", source}};
  AnnotatedLog annotated = annotate_compile_log(log, files, clang_style);
  EXPECT_EQ(annotated.error_count, 0u);
  EXPECT_EQ(annotated.text, log);
}

TEST(AnnotateCompileLog, WorksWithTheNvrtcLineStyle) {
  const std::regex edg_style(R"(^(.+)\((\d+)\): (?:catastrophic )?error)");
  std::string log = "k.cu(3): error: identifier \"oops\" is undefined\n";
  std::vector<SourceFile> files{{"k.cu", source}};
  AnnotatedLog annotated = annotate_compile_log(log, files, edg_style);
  EXPECT_EQ(annotated.error_count, 1u);
  EXPECT_NE(annotated.text.find("k.cu:3:\n  1 | // one\n  2 | // two\n> 3 | int three = oops;\n"),
            std::string::npos)
      << annotated.text;
}

// The log of Debian's ROCm 7.2 hiprtc for any source compiled for gfx11-generic.
TEST(MissingDeviceLibrary, NamesTheTargetTheLibraryAndTheRelease) {
  const std::string log =
      "error: cannot find ROCm device library for gfx11-generic; provide its path via "
      "'--rocm-path' or '--rocm-device-lib-path', or pass '-nogpulib' to build without ROCm "
      "device library\nld.lld: error: undefined hidden symbol: __ockl_get_local_id\n";
  std::optional<Error> error =
      missing_device_library(log, Target::parse("gfx11-generic"), "hiprtc, ROCm 7.2");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), Errc::unsupported_target);
  EXPECT_EQ(error->summary(), "hiprtc, ROCm 7.2 cannot compile for gfx11-generic: its compiler "
                              "finds no device library for gfx11-generic "
                              "(oclc_isa_version_11-generic.bc); give it a device-library "
                              "folder that has it (HIP_DEVICE_LIB_PATH), or build for another "
                              "target");
  EXPECT_EQ(error->detail(), log);
}

TEST(MissingDeviceLibrary, OtherFailuresAndOtherTargetsAreNotIt) {
  const std::string log = "error: cannot find ROCm device library for gfx11-generic; ...\n";
  EXPECT_FALSE(missing_device_library("k.hip:3:13: error: use of undeclared identifier 'oops'\n",
                                      Target::parse("gfx11-generic"), "hiprtc, ROCm 7.2"));
  EXPECT_FALSE(missing_device_library(log, Target::parse("gfx1101"), "hiprtc, ROCm 7.2"));
}

} // namespace
} // namespace kjit::jit

// The `kjit` command line as a script would use it: exit status, one clear line on stderr for
// bad input, and --json output that another process agrees with.
#include "tests/support/temp_dir.hpp"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

namespace kjit {
namespace {

using testing::TempDir;

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
protected:
  // Runs `kjit <args>` with its own cache directory; stdout and stderr are kept apart.
  // `environment`: more VARIABLE=value assignments for the command.
  CliRun kjit(const std::string &args, const std::string &environment = "") const {
    const auto err_file = dir / "stderr";
    const std::string command = environment + " KJIT_CACHE_DIR='" + (dir / "cache").string() +
                                "' '" + KJIT_CLI + "' " + args + " 2>'" + err_file.string() + "'";
    CliRun run;
    FILE *pipe = ::popen(command.c_str(), "r");
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      run.out.append(buffer, n);
    const int raw = ::pclose(pipe);
    run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::ifstream err(err_file);
    run.err.assign(std::istreambuf_iterator<char>(err), {});
    return run;
  }
  bool hiprtc_available() const {
    return kjit("targets --json").out.find("\"compiler\": \"hiprtc\"") != std::string::npos;
  }
  std::string write_source(const std::string &name, const std::string &text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  void expect_bad_input(const std::string &args, const std::string &fragment) const {
    const CliRun run = kjit(args);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(fragment), std::string::npos) << args << "\nstderr: " << run.err;
    EXPECT_EQ(run.err.rfind("kjit: ", 0), 0u) << run.err;
  }

  TempDir dir;
};

TEST_F(CliTest, CompileTwiceCompilesOnceAndAgreesOnTheKey) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  const CliRun first = kjit("compile scale -p T=half -p N=4096 --target gfx90a --json");
  ASSERT_EQ(first.status, 0) << first.err;
  const auto a = nlohmann::json::parse(first.out);
  EXPECT_EQ(a["cached"], false);
  EXPECT_GT(a["compile_ms"].get<double>(), 0);
  EXPECT_EQ(a["target"], "gfx90a");
  EXPECT_EQ(a["key"].get<std::string>().size(), 64u);
  EXPECT_TRUE(std::filesystem::is_regular_file(a["entry"].get<std::string>()));

  const CliRun second = kjit("compile scale -p N=4096 -p T=half --target gfx90a --json");
  ASSERT_EQ(second.status, 0) << second.err;
  const auto b = nlohmann::json::parse(second.out);
  EXPECT_EQ(b["cached"], true);
  EXPECT_EQ(b["compile_ms"], 0.0);
  EXPECT_EQ(b["key"], a["key"]);
  EXPECT_EQ(b["entry"], a["entry"]);
}

// The second process keys the variant with the compiler identity the first one remembered, so it
// never loads the 100 MB compiler library (the loader logs each library at debug level).
TEST_F(CliTest, ASecondProcessHitsTheDiskWithoutLoadingTheCompiler) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  const std::string args = "compile scale -p T=half -p N=4096 --target gfx90a --json";
  const CliRun first = kjit(args, "KJIT_LOG_LEVEL=debug");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.err.find("hiprtc: loaded"), std::string::npos) << first.err;
  const CliRun second = kjit(args, "KJIT_LOG_LEVEL=debug");
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_EQ(nlohmann::json::parse(second.out)["cached"], true);
  EXPECT_EQ(second.err.find("hiprtc: loaded"), std::string::npos) << second.err;
  EXPECT_EQ(nlohmann::json::parse(second.out)["key"], nlohmann::json::parse(first.out)["key"]);
}

TEST_F(CliTest, CompilesAKernelFromASourceFile) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  const auto source = write_source(
      "mine.hip", "template <typename T, int N> __global__ void mine(T *x) { x[0] = N; }\n");
  const CliRun run = kjit("compile --source " + source +
                          " --kernel mine -p T=half -p N=4096 --target gfx90a --json");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["kernel"], "mine<__half, 4096>");
  EXPECT_EQ(result["lowered_name"], "_Z4mineI6__halfLi4096EEvPT_");
}

TEST_F(CliTest, BadInputIsExitTwoWithOneClearLine) {
  expect_bad_input("compile nosuch --target gfx90a", "unknown template 'nosuch'");
  expect_bad_input("compile scale -p T=half -p N=4096 --target gfx9000x", "gfx9000x");
  expect_bad_input("compile scale -p T=half -p N=4096", "--target is required");
  expect_bad_input("frobnicate", "frobnicate");
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available; the checks that need it were not run";
  expect_bad_input("compile scale -p T=double -p N=4096 --target gfx90a",
                   "T = double is not allowed");
  expect_bad_input("compile scale -p T=half -p N=0 --target gfx90a", "N = 0 is out of range");
  expect_bad_input("compile scale -p T=half -p N=4096 --target gfx942", "gfx942");
  expect_bad_input("compile scale -p T=half -p N=4096 --target gfx1030:xnack+", "xnack");
}

TEST_F(CliTest, ACompileErrorPrintsTheLogWithLineNumbers) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  const auto source =
      write_source("broken.hip", "template <int N>\n__global__ void broken(int *x) {\n"
                                 "  x[0] = N + undeclared_name;\n}\n");
  const CliRun run = kjit("compile --source " + source + " --kernel broken -p N=1 --target gfx90a");
  EXPECT_EQ(run.status, 2);
  EXPECT_NE(run.err.find("broken.hip:3:"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("undeclared_name"), std::string::npos) << run.err;
}

TEST_F(CliTest, ListsTemplatesAndTargets) {
  const CliRun templates = kjit("templates --json");
  ASSERT_EQ(templates.status, 0) << templates.err;
  const auto listing = nlohmann::json::parse(templates.out)["templates"];
  ASSERT_FALSE(listing.empty());
  bool found_scale = false;
  for (const auto &t : listing)
    if (t["name"] == "scale") {
      found_scale = true;
      EXPECT_EQ(t["params"][0]["name"], "T");
      EXPECT_EQ(t["params"][0]["allowed"], nlohmann::json({"float", "half", "bfloat16"}));
    }
  EXPECT_TRUE(found_scale);

  const CliRun targets = kjit("targets --json");
  ASSERT_EQ(targets.status, 0) << targets.err;
  EXPECT_EQ(nlohmann::json::parse(targets.out)["compilers"].size(), 2u);
}

} // namespace
} // namespace kjit

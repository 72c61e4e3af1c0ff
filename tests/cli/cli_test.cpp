// The `kjit` command line as a script would use it: exit status, one clear line on stderr for
// bad input, and --json output that another process agrees with.
#include "cli_fixture.hpp"
#include "kjit/cache/entry.hpp"
#include "tests/support/redis_server.hpp"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sys/wait.h>
#include <thread>

namespace kjit {
namespace {

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

// Two nodes sharing a real Redis: the first compiles and publishes, the second (a fresh user tier)
// gets the entry from the remote, says so, and counts it in its statistics.
TEST_F(CliTest, ANodeWithAnEmptyCacheHitsTheVariantAnotherPublishedToRedis) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  testing::RedisServer redis;
  const std::string remote = "KJIT_REMOTE_STORAGE='" + redis.url() + "'";
  const std::string args = "compile scale -p T=half -p N=4096 --target gfx90a --json";
  const CliRun first = kjit(args, remote);
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_EQ(nlohmann::json::parse(first.out)["origin"], "compiled");

  std::filesystem::remove_all(dir / "cache"); // the second node has its own, empty user tier
  const CliRun second = kjit(args, remote);
  ASSERT_EQ(second.status, 0) << second.err;
  const auto hit = nlohmann::json::parse(second.out);
  EXPECT_EQ(hit["origin"], "remote");
  EXPECT_EQ(hit["key"], nlohmann::json::parse(first.out)["key"]);
  EXPECT_TRUE(std::filesystem::is_regular_file(hit["entry"].get<std::string>()))
      << "a remote hit is kept in the user tier";

  const CliRun stats = kjit("cache stats --json");
  ASSERT_EQ(stats.status, 0) << stats.err;
  const auto counters = nlohmann::json::parse(stats.out)["counters"];
  EXPECT_EQ(counters["remote_hits"], 1);
  EXPECT_EQ(counters["compiles"], 0);

  const CliRun third = kjit(args, remote);
  ASSERT_EQ(third.status, 0) << third.err;
  EXPECT_EQ(nlohmann::json::parse(third.out)["origin"], "user cache") << "then the disk serves it";
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

// A level that names none is a warning naming the accepted ones, once, and logging stays at warn
// (spdlog alone would read it as "off").
TEST_F(CliTest, AnUnknownLogLevelWarnsOnceNamingTheAcceptedLevels) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  const CliRun run =
      kjit("compile scale -p T=half -p N=4096 --target gfx90a --json", "KJIT_LOG_LEVEL=bogus");
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string warning = "KJIT_LOG_LEVEL='bogus' is not valid; it accepts trace, debug, info, "
                              "warn, error, critical or off";
  const std::size_t first = run.err.find(warning);
  EXPECT_NE(first, std::string::npos) << run.err;
  EXPECT_EQ(run.err.find(warning, first + 1), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("hiprtc: loaded"), std::string::npos) << run.err; // not at debug
}

// A template written for some targets refuses the others in one line naming those it builds for,
// before any compiler is loaded (no compile, no ptxas errors or #error from the source).
TEST_F(CliTest, ATemplateRefusesATargetItIsNotWrittenForInOneLine) {
  const struct {
    const char *args;
    const char *line;
  } cases[] = {
      {"compile gemm_wgmma --target sm_90",
       "kjit: template gemm_wgmma builds only for sm_90a, not sm_90\n"},
      {"compile gemm_mfma --target gfx90a:sramecc+",
       "kjit: template gemm_mfma builds only for gfx942 or gfx950, not gfx90a\n"},
      {"compile linear_skinny --target gfx90a",
       "kjit: template linear_skinny builds only for sm_80 and newer, not gfx90a\n"},
      {"compile gemm_mma --target sm_75",
       "kjit: template gemm_mma builds only for sm_80 and newer, not sm_75\n"},
  };
  for (const auto &c : cases) {
    const CliRun run = kjit(c.args);
    EXPECT_EQ(run.status, 2) << c.args;
    EXPECT_EQ(run.err, c.line) << c.args;
    const CliRun logged = kjit(c.args, "KJIT_LOG_LEVEL=debug"); // the loader logs each library
    EXPECT_EQ(logged.err.find(": loaded "), std::string::npos) << c.args << "\n" << logged.err;
  }
}

// A command that logs nothing applies the logging configuration all the same.
TEST_F(CliTest, EveryCommandWarnsAboutAnUnknownLogLevel) {
  for (const char *command : {"templates", "targets", "cache stats"}) {
    const CliRun run = kjit(command, "KJIT_LOG_LEVEL=bogus");
    EXPECT_EQ(run.status, 0) << command << "\n" << run.err;
    EXPECT_NE(run.err.find("KJIT_LOG_LEVEL='bogus' is not valid"), std::string::npos)
        << command << "\n"
        << run.err;
  }
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

// -I names a header library directory: two processes compiling at once compile once, the entry
// lists the header's digest among its key inputs, and an edit of the header is a miss.
TEST_F(CliTest, CompilesASourceWithAnIncludeDirectoryOnceAcrossProcesses) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  std::filesystem::create_directories(dir / "inc/mine");
  write_source("inc/mine/value.h", "#pragma once\n#define MINE_VALUE 7\n");
  const auto source = write_source(
      "mine.hip", "#include <mine/value.h>\n"
                  "template <typename T> __global__ void mine(T *x) { x[0] = MINE_VALUE; }\n");
  const std::string args = "compile --source " + source + " --kernel mine -p T=int -I " +
                           (dir / "inc").string() + " --target gfx90a --json";
  std::vector<CliRun> runs(2);
  std::vector<std::thread> processes;
  for (CliRun &run : runs)
    processes.emplace_back([&] { run = kjit(args); });
  for (std::thread &process : processes)
    process.join();
  int compiled = 0;
  for (const CliRun &run : runs) {
    ASSERT_EQ(run.status, 0) << run.err;
    compiled += nlohmann::json::parse(run.out)["origin"] == "compiled" ? 1 : 0;
  }
  EXPECT_EQ(compiled, 1);
  const std::string key = nlohmann::json::parse(runs[0].out)["key"];
  const CliRun shown = kjit("cache show " + key);
  EXPECT_NE(shown.out.find("include:0:mine/value.h = "), std::string::npos) << shown.out;
  write_source("inc/mine/value.h", "#pragma once\n#define MINE_VALUE 8\n");
  EXPECT_EQ(nlohmann::json::parse(kjit(args).out)["origin"], "compiled");
  expect_bad_input("compile --source " + source + " --kernel mine -p T=int -I " +
                       (dir / "none").string() + " --target gfx90a",
                   "include directory " + (dir / "none").string() + " does not exist");
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
  expect_bad_input("compile scale -p T=half -p N=4096 --target gfx9ff", "gfx9ff");
  expect_bad_input("compile scale -p T=half -p N=4096 --target gfx1030:xnack+", "xnack");
}

// A generic target the loaded hiprtc cannot build: ROCm 5.2 lists none (refused before hiprtc sees
// it); Debian's 6.4 and 7.2 list them but build them only with the device library on disk
// (docs/ARCHITECTURE.md, "Targets"), and without it the line names the package. Either is exit 2
// whose first line says so, never an abort or a raw log alone. With the package, it compiles.
TEST_F(CliTest, AGenericTargetTheCompilerCannotBuildIsExitTwoWithAClearLine) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  const CliRun run = kjit("compile axpy --target gfx11-generic");
  if (run.status == 0)
    GTEST_SKIP() << "this hiprtc compiles gfx11-generic";
  EXPECT_EQ(run.status, 2) << run.err;
  const std::string first = run.err.substr(0, run.err.find('\n'));
  const bool not_listed = first.starts_with("kjit: gfx11-generic is not supported by hiprtc");
  const bool no_library =
      first.starts_with("kjit: hiprtc, ROCm ") &&
      first.find(" compiles gfx11-generic only with the device library on disk: install "
                 "rocm-device-libs-") != std::string::npos;
  EXPECT_TRUE(not_listed || no_library) << run.err;
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
      EXPECT_EQ(t["targets"], nlohmann::json::array()) << "scale builds for every target";
    } else if (t["name"] == "gemm_wgmma") {
      EXPECT_EQ(t["targets"], nlohmann::json({"sm_90a"}));
    }
  EXPECT_TRUE(found_scale);
  const CliRun table_of_templates = kjit("templates");
  EXPECT_TRUE(std::regex_search(table_of_templates.out, std::regex("\ngemm_mfma +gfx942,gfx950 ")))
      << table_of_templates.out;

  const CliRun targets = kjit("targets --json");
  ASSERT_EQ(targets.status, 0) << targets.err;
  const auto compilers = nlohmann::json::parse(targets.out)["compilers"];
  EXPECT_EQ(compilers.size(), 2u);

  // The table fits 100 columns whatever the compilers' identities; -v adds each identity.
  const CliRun table = kjit("targets");
  ASSERT_EQ(table.status, 0) << table.err;
  std::istringstream lines(table.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_LE(line.size(), 100u) << line;
  const CliRun verbose = kjit("targets -v");
  ASSERT_EQ(verbose.status, 0) << verbose.err;
  for (const auto &compiler : compilers)
    if (compiler["available"] == true) {
      const std::string release = compiler["release"];
      EXPECT_NE(table.out.find(release), std::string::npos) << release << "\n" << table.out;
      EXPECT_EQ(table.out.find(compiler["version"].get<std::string>()), std::string::npos);
      EXPECT_NE(verbose.out.find(compiler["version"].get<std::string>()), std::string::npos);
    }
}

// `kjit cache`, as a script drives it: list, inspect, verify, repair and trim the user tier.
class CliCacheTest : public CliTest {
protected:
  void SetUp() override {
    if (!hiprtc_available())
      GTEST_SKIP() << "hiprtc is not available";
  }
  // Compiles scale<half, N> for gfx90a; returns its key.
  std::string compile(int n) const {
    const CliRun run =
        kjit("compile scale -p T=half -p N=" + std::to_string(n) + " --target gfx90a --json");
    EXPECT_EQ(run.status, 0) << run.err;
    return nlohmann::json::parse(run.out)["key"];
  }
  nlohmann::json json_of(const std::string &args, int status = 0) const {
    const CliRun run = kjit(args + " --json");
    EXPECT_EQ(run.status, status) << args << "\n" << run.err;
    return nlohmann::json::parse(run.out);
  }
};

TEST_F(CliCacheTest, ListsShowsAndCountsWhatWasCompiled) {
  const std::string first = compile(64), second = compile(128);
  const nlohmann::json listing = json_of("cache ls --sort template");
  ASSERT_EQ(listing.size(), 2u);
  std::set<std::string> parameters;
  for (const auto &row : listing) {
    EXPECT_EQ(row["template"], "scale");
    EXPECT_EQ(row["target"], "gfx90a");
    EXPECT_EQ(row["tier"], "user");
    EXPECT_GT(row["bytes"].get<int>(), 1000);
    parameters.insert(row["parameters"]);
  }
  EXPECT_EQ(parameters, (std::set<std::string>{"T=half N=64", "T=half N=128"}));
  EXPECT_TRUE(json_of("cache ls --template axpy").empty());
  EXPECT_TRUE(json_of("cache ls --target sm_90").empty());

  const nlohmann::json shown = json_of("cache show " + first.substr(0, 10));
  EXPECT_EQ(shown["key"], first);
  EXPECT_EQ(shown["valid"], true);
  EXPECT_EQ(shown["kernels"][0][0], "scale<__half, 64>");
  EXPECT_EQ(shown["parameters"], nlohmann::json::parse(R"({"T": "half", "N": 64})"));
  EXPECT_FALSE(shown["key_inputs"].empty());
  const nlohmann::json &resources = shown["resources"][shown["kernels"][0][1].get<std::string>()];
  EXPECT_GT(resources["registers"].get<int>(), 0);
  EXPECT_GT(resources["sgprs"].get<int>(), 0);
  EXPECT_TRUE(resources["agprs"].is_number()) << "gfx90a has AGPRs";
  EXPECT_EQ(resources["shared_bytes"], 0);
  EXPECT_EQ(resources["scratch_bytes"], 0);
  EXPECT_EQ(resources["spills"], 0);
  EXPECT_EQ(resources["wavefront_size"], 64);
  const std::string table = kjit("cache show " + first.substr(0, 10)).out;
  EXPECT_NE(table.find("resources"), std::string::npos) << table;
  EXPECT_NE(table.find("registers  agprs  sgprs"), std::string::npos) << table;

  const nlohmann::json stats = json_of("cache stats");
  ASSERT_EQ(stats["tiers"].size(), 1u);
  EXPECT_EQ(stats["tiers"][0]["entries"], 2);
  EXPECT_EQ(stats["counters"]["compiles"], 2);
  compile(64); // a hit in a new process
  EXPECT_EQ(json_of("cache stats")["counters"]["user_hits"], 1);
  EXPECT_NE(kjit("cache ls").out.find("N=128"), std::string::npos) << "the table lists it";
}

TEST_F(CliCacheTest, ExplainNamesTheKeyEachTierAndTheParameterThatDiffers) {
  compile(64);
  const std::string explain = "cache explain scale -p T=half -p N=128 --target gfx90a";
  const nlohmann::json missed = json_of(explain);
  EXPECT_EQ(missed["found"], false);
  EXPECT_EQ(missed["template"], "scale");
  ASSERT_EQ(missed["nearest"].size(), 1u);
  ASSERT_EQ(missed["nearest"][0]["differences"].size(), 1u);
  const nlohmann::json &difference = missed["nearest"][0]["differences"][0];
  EXPECT_EQ(difference["kind"], "parameter");
  EXPECT_EQ(difference["name"], "param:N");
  EXPECT_EQ(difference["wanted"], "int:128");
  EXPECT_EQ(difference["found"], "int:64");
  std::map<std::string, std::string> states;
  for (const auto &tier : missed["tiers"])
    states[tier["tier"]] = tier["state"];
  EXPECT_EQ(states["memory"], "n/a") << "a new process's memory holds nothing";
  EXPECT_EQ(states["user"], "missing");

  const std::string key = compile(128);
  EXPECT_EQ(missed["key"], key) << "explain names the key the compile then used";
  const nlohmann::json held = json_of(explain);
  EXPECT_EQ(held["found"], true);
  EXPECT_EQ(held["reason"], "held by the user tier");
  const CliRun table = kjit(explain);
  EXPECT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("verdict  held by the user tier"), std::string::npos) << table.out;

  // At debug level, a compile says why it compiled.
  const CliRun debug =
      kjit("compile scale -p T=half -p N=256 --target gfx90a", "KJIT_LOG_LEVEL=debug");
  EXPECT_EQ(debug.status, 0) << debug.err;
  EXPECT_NE(debug.err.find("compiling scale (N=256,T=half) for gfx90a: the nearest entry (user, "),
            std::string::npos)
      << debug.err;
  expect_bad_input("cache explain scale -p T=half -p N=128", "--target is required");
  expect_bad_input("cache explain scale -p T=half -p N=0 --target gfx90a", "N");
}

TEST_F(CliCacheTest, ListsAndCountsBothTiers) {
  const std::string key = compile(64);
  compile(128);
  // A prebuilt tier holding what the user tier holds for gfx90a.
  const std::filesystem::path prebuilt = dir / "prebuilt";
  std::filesystem::create_directories(prebuilt / "v2");
  std::filesystem::copy(dir / "cache" / "v2" / "gfx90a", prebuilt / "v2" / "gfx90a",
                        std::filesystem::copy_options::recursive);
  const std::string both = "KJIT_PREBUILT_DIR='" + prebuilt.string() + "'";
  const CliRun listing = kjit("cache ls --json --sort target", both);
  ASSERT_EQ(listing.status, 0) << listing.err;
  std::multiset<std::string> tiers;
  for (const auto &row : nlohmann::json::parse(listing.out)) {
    tiers.insert(row["tier"].get<std::string>());
    EXPECT_EQ(row["template"], "scale");
  }
  EXPECT_EQ(tiers, (std::multiset<std::string>{"prebuilt", "prebuilt", "user", "user"}));
  const CliRun table = kjit("cache ls", both);
  EXPECT_NE(table.out.find(key.substr(0, 12)), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("prebuilt"), std::string::npos) << table.out;
  const CliRun stats = kjit("cache stats --json", both);
  ASSERT_EQ(stats.status, 0) << stats.err;
  const nlohmann::json rows = nlohmann::json::parse(stats.out)["tiers"];
  ASSERT_EQ(rows.size(), 2u) << rows;
  for (const auto &row : rows) {
    EXPECT_EQ(row["target"], "gfx90a");
    EXPECT_EQ(row["entries"], 2);
  }
}

TEST_F(CliCacheTest, ShowDisassemblesWithTheObjdumpFoundAndSaysWhenThereIsNone) {
  const std::string key = compile(64);
  const bool rocm_objdump = std::filesystem::exists("/opt/rocm/llvm/bin/llvm-objdump");
  if (!rocm_objdump) {
    const CliRun none = kjit("cache show " + key + " --disassemble", "PATH=/nonexistent");
    EXPECT_EQ(none.status, 5) << "a helper program kjit needs is missing";
    EXPECT_NE(none.err.find("no disassembler for gfx90a found"), std::string::npos) << none.err;
  }
  if (std::system("command -v llvm-objdump >/dev/null") != 0 && !rocm_objdump)
    GTEST_SKIP() << "no llvm-objdump installed; the disassembly itself was not checked";
  const CliRun shown = kjit("cache show " + key.substr(0, 8) + " --disassemble");
  EXPECT_EQ(shown.status, 0) << shown.err;
  EXPECT_NE(shown.out.find("scale<__half, 64>"), std::string::npos) << "the header comes first";
  EXPECT_NE(shown.out.find("s_endpgm"), std::string::npos) << "the kernel's last instruction";
}

TEST_F(CliCacheTest, AFailingDisassemblerIsReportedWithItsOwnError) {
  const std::string key = compile(64);
  if (std::filesystem::exists("/opt/rocm/llvm/bin/llvm-objdump"))
    GTEST_SKIP() << "/opt/rocm's llvm-objdump is found before PATH's";
  std::filesystem::create_directories(dir / "bin");
  write_source("bin/llvm-objdump",
               "#!/bin/sh\necho 'llvm-objdump: error: unknown target cpu' >&2\nexit 3\n");
  std::filesystem::permissions(dir / "bin/llvm-objdump", std::filesystem::perms::owner_all);
  const CliRun failed =
      kjit("cache show " + key + " --disassemble", "PATH='" + (dir / "bin").string() + "'");
  EXPECT_EQ(failed.status, 5) << "a tool kjit runs failed: exit 5, as README's table says";
  EXPECT_NE(failed.err.find("could not disassemble the code object (exit status 3); it said:\n"
                            "llvm-objdump: error: unknown target cpu"),
            std::string::npos)
      << failed.err;
}

TEST_F(CliCacheTest, VerifyFindsABadEntryAndFixRemovesIt) {
  compile(64);
  const std::string bad_key = compile(128);
  const std::filesystem::path bad_path = json_of("cache show " + bad_key)["path"];
  {
    std::fstream file(bad_path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x7f');
  }
  const nlohmann::json report = json_of("cache verify", 1);
  EXPECT_EQ(report["checked"], 2);
  ASSERT_EQ(report["bad"].size(), 1u);
  EXPECT_EQ(report["bad"][0]["key"], bad_key);
  EXPECT_EQ(report["bad"][0]["problem"], "checksum mismatch");
  EXPECT_EQ(json_of("cache verify --fix", 1)["bad"][0]["action"], "removed");
  EXPECT_FALSE(std::filesystem::exists(bad_path));
  EXPECT_TRUE(json_of("cache verify")["bad"].empty());
}

TEST_F(CliCacheTest, PruneAndClear) {
  for (int n : {1, 2, 3})
    compile(n);
  const nlohmann::json pruned = json_of("cache prune --older-than 1h");
  EXPECT_EQ(pruned["removed"], 0);
  EXPECT_EQ(pruned["kept"], 3);
  // 20000 weeks in nanoseconds overflowed int64 and put the cutoff in the future: all removed.
  const nlohmann::json ancient = json_of("cache prune --older-than 20000w");
  EXPECT_EQ(ancient["removed"], 0);
  EXPECT_EQ(ancient["kept"], 3);
  const nlohmann::json trimmed = json_of("cache prune --max-size 9K");
  EXPECT_GE(trimmed["removed"], 1);
  EXPECT_LE(trimmed["kept_bytes"].get<int>(), 9 * 1024);
  EXPECT_EQ(json_of("cache ls").size(), trimmed["kept"].get<std::size_t>());
  EXPECT_EQ(json_of("cache clear")["kept"], 0);
  EXPECT_TRUE(json_of("cache ls").empty());
}

TEST_F(CliCacheTest, ShowPrintsACraftedCreationTimeWithoutOverflow) {
  const std::string key = compile(64);
  const std::filesystem::path path = json_of("cache show " + key)["path"];
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  cache::Decoded decoded = cache::decode_entry(
      std::span(reinterpret_cast<const std::byte *>(bytes.data()), bytes.size()));
  ASSERT_TRUE(decoded.entry) << decoded.problem;
  // created_unix * 10^9 overflowed int64 here: `show` printed a date in the 18th century.
  decoded.entry->header.created_unix = 9'000'000'000'000'000'000;
  const std::vector<std::byte> crafted = cache::encode_entry(*decoded.entry);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char *>(crafted.data()),
             static_cast<std::streamsize>(crafted.size()));
  const nlohmann::json shown = json_of("cache show " + key);
  EXPECT_EQ(shown["valid"], true);
  EXPECT_EQ(shown["created"], "9000000000000000000 s after the epoch");
}

TEST_F(CliCacheTest, ExportThenImportBringsTheEntriesBack) {
  const std::string first = compile(64), second = compile(128);
  const std::string archive = (dir / "warm.kjitar").string();
  EXPECT_EQ(json_of("cache export " + archive)["entries"], 2);
  EXPECT_EQ(json_of("cache clear")["removed"], 2);
  std::filesystem::copy_file(archive, archive + ".cut");
  std::filesystem::resize_file(archive + ".cut", std::filesystem::file_size(archive) / 2);
  expect_bad_input("cache import " + archive + ".cut", "truncated");
  EXPECT_TRUE(json_of("cache ls").empty()) << "nothing of a cut archive is imported";
  const nlohmann::json imported = json_of("cache import " + archive);
  EXPECT_EQ(imported["entries"], 2);
  std::set<std::string> keys;
  for (const auto &row : json_of("cache ls"))
    keys.insert(row["key"]);
  EXPECT_EQ(keys, (std::set<std::string>{first, second}));
  EXPECT_EQ(json_of("cache import " + archive)["skipped"], 2);
  expect_bad_input("cache import " + write_source("notes.txt", "not an archive"),
                   "not a kjit cache archive");
  expect_bad_input("cache import", "archive is required");
}

TEST_F(CliCacheTest, BadInputIsExitTwoWithOneClearLineAndChangesNothing) {
  std::vector<std::string> keys;
  // Enough entries that two share a first hex digit (at most 17, by pigeonhole).
  std::string shared;
  for (int n = 1; shared.empty(); ++n) {
    keys.push_back(compile(n));
    for (std::size_t i = 0; i + 1 < keys.size() && shared.empty(); ++i)
      if (keys[i][0] == keys.back()[0])
        shared = keys.back().substr(0, 1);
  }
  const CliRun ambiguous = kjit("cache show " + shared);
  EXPECT_EQ(ambiguous.status, 2);
  EXPECT_NE(ambiguous.err.find("is ambiguous"), std::string::npos) << ambiguous.err;
  for (const std::string &key : keys) {
    if (key[0] == shared[0]) {
      EXPECT_NE(ambiguous.err.find(key), std::string::npos) << "candidates are listed";
    }
  }

  expect_bad_input("cache show " + std::string(64, '0'), "no cache entry has a key starting with");
  expect_bad_input("cache show xyz", "is not a key prefix");
  expect_bad_input("cache prune", "prune needs --max-size");
  expect_bad_input("cache prune --max-size lots", "--max-size lots: expected a size");
  expect_bad_input("cache prune --older-than 7", "--older-than 7: expected an age");
  expect_bad_input("cache prune --older-than 99999999w", "at most 1000 years");
  const std::string huge(400, '9'); // std::stod's out_of_range escaped as "internal error: stod"
  expect_bad_input("cache prune --max-size " + huge, "expected a size");
  const CliRun huge_size = kjit("cache prune --max-size 1G", "KJIT_CACHE_SIZE=" + huge);
  EXPECT_EQ(huge_size.status, 2) << huge_size.err;
  EXPECT_EQ(huge_size.err.rfind("kjit: KJIT_CACHE_SIZE='999", 0), 0u) << huge_size.err;
  expect_bad_input("cache ls --sort colour", "--sort colour");
  expect_bad_input("cache frobnicate", "unknown cache command 'frobnicate'; commands: ls, stats");
  EXPECT_EQ(json_of("cache ls").size(), keys.size()) << "nothing was removed";
}

// A tuning table of one record whose "key" is KEY, not the key of its content.
const std::string tuning_table_with_a_wrong_key =
    R"({"records": [{"format": 1, "key": "KEY", "template": "rms_norm",
  "source_digest": "d", "problem": {"HIDDEN": 4096, "T": "bfloat16"}, "extents": {"rows": 64},
  "target": "sm_90a", "compute_units": 132, "device": "NVIDIA H100", "compiler": "nvrtc",
  "winner": {"params": {"THREADS": 256, "VEC": 8}, "time_us": 3.5}, "runners_up": [],
  "created_unix": 1764000000}]})";

// The key of the record's content, which `kjit tune import` names when it refuses the record: ""
// when it does not.
std::string key_named_by(const CliRun &refused) {
  const std::string named = "is not the key of its content, ";
  const std::size_t at = refused.err.find(named);
  return at == std::string::npos ? "" : refused.err.substr(at + named.size(), 64);
}

// The tuning table from the command line, on a machine without a GPU: records imported,
// listed as {"records": [...]}, shown, exported as CSV and in a cache archive; tuning says there
// is no GPU (exit 3).
TEST_F(CliTest, TuneManagesTheTableAndNeedsAGpuToTune) {
  // The key is the record's own, computed from its content: a wrong one is refused, naming the
  // right one, and nothing is stored.
  const CliRun wrong =
      kjit("tune import " + write_source("wrong.json", tuning_table_with_a_wrong_key));
  EXPECT_EQ(wrong.status, 2);
  EXPECT_EQ(wrong.err.rfind("kjit: ", 0), 0u) << wrong.err;
  const std::string key = key_named_by(wrong);
  ASSERT_FALSE(key.empty()) << wrong.err;
  const CliRun empty = kjit("tune ls --json");
  ASSERT_EQ(empty.status, 0) << empty.err;
  EXPECT_EQ(nlohmann::json::parse(empty.out), nlohmann::json::parse(R"({"records": []})"));

  std::string right = tuning_table_with_a_wrong_key;
  right.replace(right.find("KEY"), 3, key);
  const CliRun imported = kjit("tune import --json " + write_source("right.json", right));
  ASSERT_EQ(imported.status, 0) << imported.err;
  EXPECT_EQ(nlohmann::json::parse(imported.out).at("imported"), 1);
  // The record travels in cache archives (tuning_test.cpp checks what import refuses).
  const std::string archive = write_source("warm.kjitar", "");
  const CliRun exported = kjit("cache export --json " + archive);
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_EQ(nlohmann::json::parse(exported.out).at("tuning_records"), 1);
  const CliRun reimported = kjit("cache import --json " + archive);
  ASSERT_EQ(reimported.status, 0) << reimported.err;
  EXPECT_EQ(nlohmann::json::parse(reimported.out).at("tuning_records"), 1);
  const nlohmann::json listed = nlohmann::json::parse(kjit("tune ls --json").out);
  ASSERT_EQ(listed.at("records").size(), 1u);
  EXPECT_EQ(listed.at("records").at(0).at("key"), key);
  const CliRun shown = kjit("tune show " + key.substr(0, 8));
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_EQ(nlohmann::json::parse(shown.out).at("winner").at("params").at("VEC"), 8);
  const std::string csv = write_source("table.csv", "");
  ASSERT_EQ(kjit("tune export --csv " + csv).status, 0);
  std::ifstream csv_file(csv);
  const std::string csv_text((std::istreambuf_iterator<char>(csv_file)), {});
  EXPECT_NE(csv_text.find("rms_norm"), std::string::npos) << csv_text;
  EXPECT_NE(csv_text.find("\"sm_90a\",132"), std::string::npos) << csv_text;

  const std::string shapes =
      write_source("shapes.json", R"({"types": ["bfloat16"], "rows": [64], "lengths": [4096]})");
  const CliRun tuned = kjit("tune rms_norm --shapes " + shapes);
  if (tuned.status == 0)
    GTEST_SKIP() << "a GPU is present: tuning is checked by kjit_ops_gpu_tests";
  EXPECT_EQ(tuned.status, 3) << tuned.err;
  EXPECT_NE(tuned.err.find("kjit: cannot tune: no GPU"), std::string::npos) << tuned.err;
  const CliRun unknown = kjit("tune gemm --shapes " + shapes);
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("the tunable operators are"), std::string::npos) << unknown.err;
  // Bad input is refused (exit 2) before a GPU is looked for.
  const std::string tune = "tune rms_norm --shapes " + shapes;
  expect_bad_input(tune + " --space WARPS=1,2", "search space: unknown parameter 'WARPS'");
  expect_bad_input(tune + " --space VEC=3", "search space: ");
  expect_bad_input(tune + " --space HIDDEN=1024", "'HIDDEN' is a problem parameter");
  expect_bad_input(tune + " --space VEC", "--space VEC: expected NAME=V1,V2,...");
  expect_bad_input(tune + " --space VEC=,4", "--space VEC=,4: an empty value");
  expect_bad_input(tune + " --budget 0", "too small for one candidate");
  expect_bad_input("tune rms_norm --shapes " +
                       write_source("bad_shapes.json", R"({"types": ["int8"], "rows": [64],
                                                           "lengths": [4096]})"),
                   "type 'int8' is not float, half or bfloat16");
  // A valid space still needs the GPU.
  EXPECT_EQ(kjit(tune + " --space VEC=4,8 --space THREADS=128").status, 3);
}

// A library's template, as its set file declares it with "tunable" parameters, goes through the
// same tuner: its set, shapes and launch description are checked before a GPU is looked for.
TEST_F(CliTest, TuneSetsTunesALibrarysTemplateAfterCheckingItsInput) {
  write_source("rows.hip", R"(template <typename T, int HIDDEN, int VEC>
__global__ void scale_rows(T *out, const T *x, int rows) {
  for (int i = threadIdx.x * VEC; i < HIDDEN; i += blockDim.x * VEC)
    for (int v = 0; v < VEC; ++v)
      out[blockIdx.x * HIDDEN + i + v] = x[blockIdx.x * HIDDEN + i + v];
})");
  const std::string set_text = R"({"name": "lib", "level": 1, "templates": [
  {"name": "scale_rows", "source": "rows.hip", "params": ["T", "HIDDEN", "VEC"],
   "arguments": ["T*", "const T*", "int"], "tunable": ["VEC"]}],
 "variants": [{"template": "scale_rows", "params": {"T": "half", "HIDDEN": 4096, "VEC": [1, 2, 4]}}]})";
  const std::string set = write_source("lib.json", set_text);
  const std::string launch =
      R"("launch": {"grid": "rows", "block": 256, "arguments": [{"output": "rows*HIDDEN"}, {"input": "rows*HIDDEN"}, "rows"]})";
  const std::string shapes = write_source(
      "lib_shapes.json",
      R"({"problems": [{"T": "half", "HIDDEN": 4096}], "rows": [1, 64], )" + launch + "}");
  const std::string tune = "tune --sets " + set + " scale_rows --shapes " + shapes;
  const CliRun tuned = kjit(tune);
  if (tuned.status == 0)
    GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(tuned.status, 3) << tuned.err;
  EXPECT_NE(tuned.err.find("kjit: cannot tune: no GPU"), std::string::npos) << tuned.err;
  EXPECT_EQ(kjit(tune + " --space VEC=2,4").status, 3) << "a valid space still needs the GPU";

  expect_bad_input("tune --sets " + set + " scale_rowz --shapes " + shapes,
                   "declares no template 'scale_rowz' (its templates: scale_rows)");
  expect_bad_input(tune + " --space VEC=3", "parameter VEC = 3 is not allowed");
  expect_bad_input(tune + " --space HIDDEN=1024", "'HIDDEN' is a problem parameter");
  std::string untunable = set_text;
  const std::string tunable_field = R"(, "tunable": ["VEC"])";
  untunable.erase(untunable.find(tunable_field), tunable_field.size());
  expect_bad_input("tune --sets " + write_source("untunable.json", untunable) +
                       " scale_rows --shapes " + shapes,
                   "has no tunable parameter");
  std::string misspelled = set_text;
  misspelled.replace(misspelled.find(R"(["VEC"])"), 7, R"(["VECC"])");
  expect_bad_input("tune --sets " + write_source("misspelled.json", misspelled) +
                       " scale_rows --shapes " + shapes,
                   "misspelled.json:3: template scale_rows: tunable parameter VECC is not one of "
                   "its \"params\"");
  auto shapes_with = [&](const std::string &name, const std::string &launch_text) {
    return "tune --sets " + set + " scale_rows --shapes " +
           write_source(name, R"({"problems": [{"T": "half", "HIDDEN": 4096}], "rows": [1], )" +
                                  launch_text + "}");
  };
  expect_bad_input(
      shapes_with(
          "extra.json",
          R"("launch": {"grid": "rows", "block": 256, "arguments": [{"output": "rows*HIDDEN"}, {"input": "rows*HIDDEN"}, "rows", 1]})"),
      "launch gives 4 arguments, scale_rows declares 3");
  expect_bad_input(
      shapes_with(
          "scalar.json",
          R"("launch": {"grid": "rows", "block": 256, "arguments": ["rows", {"input": "rows*HIDDEN"}, "rows"]})"),
      "launch argument 1 (T*): expected {\"input\": SIZE} or {\"output\": SIZE}");
  expect_bad_input(
      shapes_with(
          "factor.json",
          R"("launch": {"grid": "rows*HIDEN", "block": 256, "arguments": [{"output": "rows*HIDDEN"}, {"input": "rows*HIDDEN"}, "rows"]})"),
      "launch grid: 'HIDEN' is no integer, \"rows\" or integer parameter");
}

// A table entry that is corrupt or filed under another key is skipped with one warning: the
// other records are listed, and nothing is removed.
TEST_F(CliTest, TuneListsTheTableSkippingBadRecordsWithOneWarningEach) {
  const CliRun wrong =
      kjit("tune import " + write_source("wrong.json", tuning_table_with_a_wrong_key));
  const std::string key = key_named_by(wrong);
  ASSERT_FALSE(key.empty()) << wrong.err;
  std::string right = tuning_table_with_a_wrong_key;
  right.replace(right.find("KEY"), 3, key);
  ASSERT_EQ(kjit("tune import " + write_source("right.json", right)).status, 0);
  const nlohmann::json listed = nlohmann::json::parse(kjit("tune ls --json").out);
  ASSERT_EQ(listed.at("records").size(), 1u);

  // Beside the good record: a corrupt one, and a good one copied under another key (as a record
  // for another device would be found under this device's key).
  std::filesystem::path good;
  for (const auto &item : std::filesystem::recursive_directory_iterator(dir / "cache"))
    if (item.path().extension() == ".json")
      good = item.path();
  ASSERT_FALSE(good.empty());
  const std::filesystem::path corrupt = good.parent_path() / (std::string(64, 'a') + ".json");
  const std::filesystem::path misfiled = good.parent_path() / (std::string(64, 'b') + ".json");
  std::ofstream(corrupt) << "{\"format\": 1, \"key\": ";
  std::filesystem::copy_file(good, misfiled);
  for (const std::filesystem::path &file : {corrupt, misfiled})
    std::filesystem::permissions(file, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write);
  const CliRun listing = kjit("tune ls --json");
  ASSERT_EQ(listing.status, 0) << listing.err;
  EXPECT_EQ(nlohmann::json::parse(listing.out).at("records").size(), 1u);
  EXPECT_EQ(nlohmann::json::parse(listing.out).at("records").at(0).at("key"), key);
  for (const std::filesystem::path &file : {corrupt, misfiled}) {
    const std::string warning = "ignoring tuning record " + file.string();
    const std::size_t at = listing.err.find(warning);
    EXPECT_NE(at, std::string::npos) << listing.err;
    EXPECT_EQ(listing.err.find(warning, at + 1), std::string::npos) << "warned twice";
    EXPECT_TRUE(std::filesystem::exists(file)) << "removed";
  }
}

} // namespace
} // namespace kjit

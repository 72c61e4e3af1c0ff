// `kjit prebuild` writes entries that a fresh process in KJIT_MODE=prebuilt finds without a
// compiler, does nothing when nothing changed, writes the same bytes every time, keeps going past
// a variant that does not compile, and refuses bad input with one line. (How the variants are
// batched and sharded: tests/runtime/prebuild_batches_test.cpp.)
#include "cli_fixture.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/library.hpp"
#include "mylib.hpp"
#include "mylib_kernels.hpp"
#include "tests/support/files.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

namespace kjit {
namespace {

namespace fs = std::filesystem;

class PrebuildCliTest : public CliTest {
protected:
  void SetUp() override {
    if (!hiprtc_available())
      GTEST_SKIP() << "hiprtc is not available";
  }
  // A user set: `mine` in 2 x `sizes` variants, and optionally `broken`, which fails for N=3.
  std::string user_set(int sizes, bool with_broken) const {
    write_source("mine.hip", "template <typename T, int N> __global__ void mine(T *x) {\n"
                             "  if (threadIdx.x < N) x[threadIdx.x] += T(1);\n}\n");
    write_source("broken.hip", "template <typename T, int N> __global__ void broken(T *x) {\n"
                               "  static_assert(N != 3, \"three is refused\");\n}\n");
    std::string ns;
    for (int n = 1; n <= sizes; ++n)
      ns += (n > 1 ? ", " : "") + std::to_string(n);
    return write_source(
        "set.json",
        std::string(R"({"name": "mine", "level": 1,
            "templates": [{"name": "mine", "source": "mine.hip", "params": ["T", "N"]})") +
            (with_broken ? R"(, {"name": "broken", "source": "broken.hip", "params": ["T", "N"]})"
                         : "") +
            R"(],
            "variants": [{"template": "mine", "params": {"T": ["float", "int"], "N": [)" +
            ns + "]}}" +
            (with_broken
                 ? R"(, {"template": "broken", "params": {"T": "float", "N": [1, 2, 3, 4]}})"
                 : "") +
            "]}");
  }
  // Every file under `root`, relative path -> bytes.
  static std::map<std::string, std::vector<std::byte>> tree(const fs::path &root) {
    std::map<std::string, std::vector<std::byte>> files;
    for (const auto &item : fs::recursive_directory_iterator(root))
      if (item.is_regular_file())
        files[fs::relative(item.path(), root).string()] = testing::read_file_bytes(item.path());
    return files;
  }
  static std::size_t entries(const fs::path &root) {
    std::size_t count = 0;
    for (const auto &item : fs::recursive_directory_iterator(root))
      count += item.path().extension() == ".kjit";
    return count;
  }
  std::string prebuilt_env(const fs::path &tier) const {
    return "KJIT_MODE=prebuilt KJIT_PREBUILT_DIR='" + tier.string() + "'";
  }
};

TEST_F(PrebuildCliTest, PrebuiltModeFindsTheEntriesWithoutLoadingACompilerAndARerunDoesNothing) {
  const fs::path tier = dir / "prebuilt";
  // As cmake --install runs it: the targets and level from GPU_ARCHS and PREBUILD_KERNELS.
  const CliRun built = kjit("prebuild --json --out " + tier.string(),
                            "GPU_ARCHS='gfx90a' PREBUILD_KERNELS=3 MAX_JOBS=1");
  ASSERT_EQ(built.status, 0) << built.err;
  const auto summary = nlohmann::json::parse(built.out);
  EXPECT_EQ(summary["level"], 3);
  EXPECT_EQ(summary["targets"], "gfx90a");
  EXPECT_EQ(summary["jobs"], 1);
  EXPECT_EQ(summary["built"], summary["variants"]);
  EXPECT_GT(summary["bytes"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(entries(tier), summary["variants"].get<std::size_t>());
  EXPECT_EQ(fs::status(tier / "v2").permissions() & fs::perms::others_read, fs::perms::others_read)
      << "a prebuilt tier is readable by everyone";

  // A fresh process with an empty user tier (no compiler memo): LD_DEBUG lists every library the
  // loader opens, and hiprtc's is not among them.
  const CliRun hit = kjit("compile scale -p T=half -p N=4096 --target gfx90a --json",
                          prebuilt_env(tier) + " LD_DEBUG=files");
  ASSERT_EQ(hit.status, 0) << hit.err;
  EXPECT_EQ(nlohmann::json::parse(hit.out)["origin"], "prebuilt");
  EXPECT_EQ(hit.err.find("libamdhip64"), std::string::npos) << "the compiler was loaded";
  EXPECT_NE(hit.err.find("file="), std::string::npos) << "LD_DEBUG reported no library";

  const auto before = tree(tier);
  const CliRun again = kjit("prebuild --targets gfx90a --level 3 --out " + tier.string());
  EXPECT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("nothing to do"), std::string::npos) << again.out;
  EXPECT_EQ(tree(tier), before);
}

// --tuned builds exactly the winners of an exported table for their targets, and ships the
// records in the tier, where a table reading it finds them.
TEST_F(PrebuildCliTest, TunedBuildsTheWinnersAndShipsTheRecords) {
  const fs::path tier = dir / "prebuilt";
  const TuningKey key =
      TuningKey::of(templates::find("rms_norm"), {{"T", "half"}, {"HIDDEN", 4096}}, {{"rows", 64}},
                    {"gfx90a", 104, "AMD Instinct MI210"}, "hiprtc");
  const TuningRecord record{key, {{{"VEC", 4}, {"THREADS", 512}}, 3.0}, {}, 1764000000};
  const std::string exported = write_source("tuned.json", tuning_records_json({record}));
  const CliRun built =
      kjit("prebuild --tuned " + exported + " --json --jobs 1 --out " + tier.string());
  ASSERT_EQ(built.status, 0) << built.err;
  const auto summary = nlohmann::json::parse(built.out);
  EXPECT_EQ(summary["variants"], 1);
  EXPECT_EQ(summary["built"], 1);
  EXPECT_EQ(summary["targets"], "gfx90a");
  EXPECT_EQ(entries(tier), 1u);
  const std::optional<TuningRecord> shipped = TuningTable({}, tier).find(key);
  ASSERT_TRUE(shipped);
  EXPECT_EQ(*shipped, record);
  // The winner's variant is what a prebuilt-mode process finds.
  const CliRun hit = kjit("compile rms_norm -p T=half -p HIDDEN=4096 -p VEC=4 -p THREADS=512 "
                          "--target gfx90a --json",
                          prebuilt_env(tier));
  ASSERT_EQ(hit.status, 0) << hit.err;
  EXPECT_EQ(kjit("prebuild --tuned " + exported + " --targets sm_90 --out " + tier.string()).status,
            2);
}

TEST_F(PrebuildCliTest, AMissNamesTheVariantTargetAndPrebuildCommand) {
  const fs::path tier = dir / "prebuilt";
  ASSERT_EQ(kjit("prebuild --targets gfx90a --level 3 --out " + tier.string()).status, 0);
  const CliRun unknown =
      kjit("compile scale -p T=half -p N=4097 --target gfx90a", prebuilt_env(tier));
  EXPECT_EQ(unknown.status, 2);
  EXPECT_NE(unknown.err.find("scale (N=4097,T=half) for gfx90a"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("kjit prebuild --sets FILE --targets \"gfx90a\""), std::string::npos)
      << unknown.err;
  const CliRun in_level =
      kjit("compile scale -p T=float -p N=1024 --target gfx90a", prebuilt_env(tier));
  EXPECT_NE(in_level.err.find("kjit prebuild --level 1 --targets \"gfx90a\""), std::string::npos)
      << in_level.err;
}

// GPU_ARCHS names processors ("gfx90a"); a device asks for its own target id with features.
// Code built for no feature setting runs under either, so it serves that device; another
// processor's never does.
TEST_F(PrebuildCliTest, APrebuildForAProcessorServesItsFeatureSettings) {
  const fs::path tier = dir / "prebuilt";
  ASSERT_EQ(kjit("prebuild --targets gfx90a --level 3 --out " + tier.string()).status, 0);
  for (const char *device : {"gfx90a:sramecc+:xnack-", "gfx90a:xnack+"}) {
    const CliRun run =
        kjit(std::string("compile scale -p T=half -p N=4096 --json --target ") + device,
             prebuilt_env(tier));
    ASSERT_EQ(run.status, 0) << device << ": " << run.err;
    EXPECT_EQ(nlohmann::json::parse(run.out)["origin"], "prebuilt") << device;
  }
  EXPECT_EQ(kjit("compile scale -p T=half -p N=4096 --target gfx908", prebuilt_env(tier)).status,
            2);
}

// A machine with no compiler, in the default JIT mode: the prebuilt tier's identity still finds
// its entries; a variant it lacks is a clear error, not a crash.
TEST_F(PrebuildCliTest, WithoutACompilerThePrebuiltTierStillServes) {
  const fs::path tier = dir / "prebuilt";
  ASSERT_EQ(kjit("prebuild --targets gfx90a --level 3 --out " + tier.string()).status, 0);
  // Under AddressSanitizer (tools/test --sanitize address) the preloaded shim comes before ASan's
  // runtime in the library list, which ASan refuses by default; the shim interposes dlopen alone,
  // nothing ASan intercepts, so its check is turned off for this child only.
  const char *asan_options = std::getenv("ASAN_OPTIONS");
  const std::string no_compiler = "KJIT_PREBUILT_DIR='" + tier.string() +
                                  "' LD_PRELOAD='" KJIT_NO_COMPILERS "' ASAN_OPTIONS='" +
                                  (asan_options != nullptr ? std::string(asan_options) + ":" : "") +
                                  "verify_asan_link_order=0'";
  const CliRun hit = kjit("compile scale -p T=half -p N=4096 --target gfx90a --json", no_compiler);
  ASSERT_EQ(hit.status, 0) << hit.err;
  EXPECT_EQ(nlohmann::json::parse(hit.out)["origin"], "prebuilt");
  const CliRun miss = kjit("compile scale -p T=half -p N=4097 --target gfx90a", no_compiler);
  EXPECT_EQ(miss.status, 5) << "a compiler library that does not load";
  EXPECT_NE(miss.err.find("hiprtc could not be loaded"), std::string::npos) << miss.err;
}

// AITER #3846: code built for one GPU loaded on another. A gfx90a entry is never loaded for
// gfx1030: not by its key (the target is in it), nor when planted at the gfx1030 entry's path.
TEST_F(PrebuildCliTest, AnEntryForAnotherTargetIsNeverLoaded) {
  const fs::path tier = dir / "prebuilt";
  ASSERT_EQ(kjit("prebuild --targets gfx90a --level 3 --out " + tier.string()).status, 0);
  const std::string gfx1030 = "compile scale -p T=half -p N=4096 --target gfx1030 --json";
  EXPECT_EQ(kjit(gfx1030, prebuilt_env(tier)).status, 2);

  const CliRun jit = kjit(gfx1030); // the gfx1030 key and entry path, from the user tier
  ASSERT_EQ(jit.status, 0) << jit.err;
  const auto compiled = nlohmann::json::parse(jit.out);
  fs::remove(compiled["entry"].get<std::string>()); // only the planted one is left to find
  const std::string key = compiled["key"];
  const fs::path planted = tier / "v2" / "gfx1030" / key.substr(0, 2) / (key + ".kjit");
  fs::create_directories(planted.parent_path());
  for (const auto &item : fs::recursive_directory_iterator(tier / "v2" / "gfx90a"))
    if (item.path().extension() == ".kjit") {
      fs::copy_file(item.path(), planted, fs::copy_options::overwrite_existing);
      const CliRun refused = kjit(gfx1030, prebuilt_env(tier));
      EXPECT_EQ(refused.status, 2) << item.path();
      EXPECT_NE(refused.err.find("ignoring cache entry"), std::string::npos) << refused.err;
    }
}

TEST_F(PrebuildCliTest, TheSameInputsGiveByteIdenticalTiersWhateverTheJobs) {
  const std::string set = user_set(6, false);
  ASSERT_EQ(
      kjit("prebuild --sets " + set + " --targets gfx90a --jobs 1 --out " + (dir / "one").string())
          .status,
      0);
  ASSERT_EQ(
      kjit("prebuild --sets " + set + " --targets gfx90a --jobs 2 --out " + (dir / "two").string())
          .status,
      0);
  const auto one = tree(dir / "one");
  EXPECT_EQ(entries(dir / "one"), 12u);
  if (one != tree(dir / "two")) {
    // hiprtc 6.4 emits the same program's code object differently from one run to the next, so
    // the jobs cannot be blamed unless the same jobs give the same bytes.
    ASSERT_EQ(kjit("prebuild --sets " + set + " --targets gfx90a --jobs 1 --out " +
                   (dir / "again").string())
                  .status,
              0);
    if (one != tree(dir / "again"))
      GTEST_SKIP() << "this compiler's code objects differ between two runs with the same jobs";
    EXPECT_EQ(one, tree(dir / "two"));
  }
  // Smaller programs change the code objects, but every worker builds the programs planned.
  const CliRun smaller = kjit("prebuild --sets " + set + " --targets gfx90a --jobs 2 --json " +
                              "--max-batch 4 --out " + (dir / "smaller").string());
  ASSERT_EQ(smaller.status, 0) << smaller.err;
  EXPECT_EQ(nlohmann::json::parse(smaller.out)["batches"], 3);
  EXPECT_EQ(entries(dir / "smaller"), 12u);
}

TEST_F(PrebuildCliTest, ShardsTogetherBuildTheWholeTier) {
  const std::string set = user_set(6, false);
  std::map<std::string, std::vector<std::byte>> shards;
  for (int k = 1; k <= 3; ++k) {
    const fs::path tier = dir / ("shard" + std::to_string(k));
    const CliRun run = kjit("prebuild --sets " + set + " --targets gfx90a --jobs 2 --shard " +
                            std::to_string(k) + "/3 --max-batch 1 --out " + tier.string());
    ASSERT_EQ(run.status, 0) << run.err;
    for (auto &[path, bytes] : tree(tier)) {
      if (path.ends_with(".kjit")) {
        EXPECT_TRUE(shards.emplace(path, bytes).second) << path << " built by two shards";
      }
    }
  }
  ASSERT_EQ(kjit("prebuild --sets " + set + " --targets gfx90a --max-batch 1 --out " +
                 (dir / "whole").string())
                .status,
            0);
  std::map<std::string, std::vector<std::byte>> whole;
  for (auto &[path, bytes] : tree(dir / "whole"))
    if (path.ends_with(".kjit"))
      whole.emplace(path, bytes);
  EXPECT_EQ(whole.size(), 12u);
  EXPECT_EQ(shards, whole) << "each variant alone in its program: byte-identical entries";
  expect_bad_input("prebuild --sets " + set + " --targets gfx90a --shard 4/3 --out " +
                       (dir / "bad").string(),
                   "--shard '4/3'");
}

// Variants that fail with one error are one line: the count and the first of them. A target the
// compiler cannot build (a generic target on Debian's ROCm 6.4) fails every variant so.
// A library's template with a header folder of its own and an option, declared once in its C++
// Template (library_norm) and once in its set file (parameters listed in another order there).
class LibraryPrebuildTest : public PrebuildCliTest {
protected:
  void SetUp() override {
    PrebuildCliTest::SetUp();
    fs::create_directories(dir / "include/mylib");
    write_source("include/mylib/math.h", math);
    write_source("norm.hip", source);
    set = write_source("mylib.json", R"({"name": "mylib", "level": 1,
      "templates": [{"name": "norm", "source": "norm.hip", "params": ["T", "HIDDEN"],
                     "headers": ["include"], "compile_options": ["-DMYLIB_BIAS=1"]}],
      "variants": [{"template": "norm",
                    "params": {"HIDDEN": [1024, 4096], "T": ["float", "int"]}}]})");
  }
  // The library's own declaration, as its JIT calls use it: a wider schema than the set's.
  Template library_norm(const std::string &header) const {
    return Template{"norm",
                    source,
                    {{"T", ParamSchema::type({"float", "int", "half"})},
                     {"HIDDEN", ParamSchema::integer(1, 1 << 20)}},
                    {.headers = {{"mylib/math.h", header}}, .compile_options = {"-DMYLIB_BIAS=1"}}};
  }
  fs::path prebuild() const {
    const fs::path tier = dir / "prebuilt";
    const CliRun built =
        kjit("prebuild --sets " + set + " --targets gfx90a --out " + tier.string());
    EXPECT_EQ(built.status, 0) << built.err;
    return tier;
  }

  const std::string math =
      "#pragma once\ntemplate <typename T> __device__ T twice(T x) { return x + x; }\n";
  const std::string source =
      "#include \"mylib/math.h\"\n"
      "template <typename T, int HIDDEN> __global__ void norm(T *x) "
      "{ x[threadIdx.x] = twice(x[threadIdx.x]) + T(HIDDEN + MYLIB_BIAS); }\n";
  std::string set;
};

TEST_F(LibraryPrebuildTest, AVariantPrebuiltFromASetIsTheOneTheLibrarysJitCallBuilds) {
  Config config;
  config.mode = Mode::prebuilt;
  config.cache_dir = dir / "cache";
  config.prebuilt_dir = prebuild();
  Runtime rt(config);
  const Template norm = library_norm(math);
  for (const char *type : {"float", "int"})
    for (int hidden : {1024, 4096}) {
      const CodeObject &code =
          rt.compile(norm, {{"T", type}, {"HIDDEN", hidden}}, jit::Target::parse("gfx90a"));
      EXPECT_EQ(code.origin(), Origin::prebuilt) << type << " " << hidden;
      EXPECT_EQ(code.entry_path().filename().string(), code.key().hex() + ".kjit");
    }
  EXPECT_EQ(rt.counters().compiled, 0u);
  // The header's content is in the key: a library whose header differs finds nothing.
  const Template edited = library_norm(math + "// edited\n");
  EXPECT_THROW(rt.compile(edited, {{"T", "float"}, {"HIDDEN", 1024}}, jit::Target::parse("gfx90a")),
               Error);
}

// The same library with its header folder as an include directory ("include_dirs", relative to
// the set file): the prebuilt tier holds each variant's header manifest beside its entries.
TEST_F(LibraryPrebuildTest, AnIncludeDirectoryOfASetIsKeyedByItsHeaders) {
  set = write_source("mylib-dirs.json", R"({"name": "mylib", "level": 1,
      "templates": [{"name": "norm", "source": "norm.hip", "params": ["T", "HIDDEN"],
                     "include_dirs": ["include"], "compile_options": ["-DMYLIB_BIAS=1"]}],
      "variants": [{"template": "norm", "params": {"HIDDEN": 1024, "T": "float"}}]})");
  Config config;
  config.mode = Mode::prebuilt;
  config.cache_dir = dir / "cache";
  config.prebuilt_dir = prebuild();
  const Template norm{
      "norm",
      source,
      {{"T", ParamSchema::type({"float", "int"})}, {"HIDDEN", ParamSchema::integer(1, 1 << 20)}},
      {.include_dirs = {(dir / "include").string()}, .compile_options = {"-DMYLIB_BIAS=1"}}};
  const ParamValues params = {{"T", "float"}, {"HIDDEN", 1024}};
  EXPECT_EQ(Runtime(config).compile(norm, params, jit::Target::parse("gfx90a")).origin(),
            Origin::prebuilt);
  write_source("include/mylib/math.h", math + "// edited\n");
  EXPECT_THROW(Runtime(config).compile(norm, params, jit::Target::parse("gfx90a")), Error);
}

TEST_F(LibraryPrebuildTest, TheCommandLineReproducesASetsVariantAndRefusesWrongNames) {
  const std::string env = prebuilt_env(prebuild());
  const CliRun listed = kjit("templates --json --sets " + set);
  ASSERT_EQ(listed.status, 0) << listed.err;
  const nlohmann::json templates = nlohmann::json::parse(listed.out)["templates"];
  ASSERT_EQ(templates.size(), 1u) << templates;
  EXPECT_EQ(templates[0]["name"], "norm");
  EXPECT_EQ(templates[0]["params"][0]["name"], "T");
  EXPECT_EQ(templates[0]["params"][1]["name"], "HIDDEN");

  // The set's declaration: parameters by name, in any order, found under the JIT call's key.
  for (const std::string &how : {"norm --sets " + set, "--sets " + set + " --template norm"}) {
    const CliRun found =
        kjit("compile " + how + " -p HIDDEN=1024 -p T=float --target gfx90a --json", env);
    ASSERT_EQ(found.status, 0) << found.err;
    EXPECT_EQ(nlohmann::json::parse(found.out)["origin"], "prebuilt") << how;
  }
  // A plain source file with the same header and option: the same key.
  const CliRun by_hand =
      kjit("compile --source " + (dir / "norm.hip").string() +
               " --kernel norm --header mylib/math.h=" + (dir / "include/mylib/math.h").string() +
               " -DMYLIB_BIAS=1 -p T=float -p HIDDEN=4096 --target gfx90a --json",
           env);
  ASSERT_EQ(by_hand.status, 0) << by_hand.err;
  EXPECT_EQ(nlohmann::json::parse(by_hand.out)["origin"], "prebuilt");

  expect_bad_input("compile norm --sets " + set + " -p HIDEN=1024 -p T=float --target gfx90a",
                   "unknown parameter 'HIDEN'");
  expect_bad_input("compile nrm --sets " + set + " -p T=float --target gfx90a",
                   "mylib.json's templates: norm");
  expect_bad_input("compile scale -DX=1 -p T=half -p N=64 --target gfx90a",
                   "--header, -D and --option go with --source");
}

// examples/mylib as built: its templates' sources embedded by kjit_embed_sources() from the files
// its set file names. Every variant kjit prebuild builds from that set is found by the library's
// own JIT call (the same key, byte for byte), and nothing is compiled.
TEST_F(PrebuildCliTest, AnEmbeddingLibrarysJitCallsFindEveryVariantPrebuiltFromItsSet) {
  EXPECT_EQ(testing::bytes_of(mylib::kernels::source("axpby.hip")),
            testing::read_file_bytes(fs::path(MYLIB_SOURCE_DIR) / "kernels/axpby.hip"));
  const std::vector<HeaderFile> headers = mylib::kernels::headers("include");
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_EQ(headers[0].name, "mylib/math.h");
  EXPECT_THROW(mylib::kernels::source("missing.hip"), Error);

  const fs::path tier = dir / "prebuilt";
  const CliRun built = kjit(
      "prebuild --sets " MYLIB_SOURCE_DIR "/kernels.json --targets gfx90a --out " + tier.string());
  ASSERT_EQ(built.status, 0) << built.err;
  Config config;
  config.mode = Mode::prebuilt;
  config.cache_dir = dir / "cache";
  config.prebuilt_dir = tier;
  Runtime rt(config);
  const jit::Target gfx90a = jit::Target::parse("gfx90a");
  for (const char *type : {"float", "half"})
    for (int n : {1024, 4096})
      EXPECT_EQ(rt.compile(mylib::axpby(), {{"T", type}, {"N", n}}, gfx90a).origin(),
                Origin::prebuilt);
  for (const char *type : {"half", "bfloat16"})
    for (int hidden : {2048, 4096})
      EXPECT_EQ(rt.compile(mylib::rms_norm(), {{"T", type}, {"HIDDEN", hidden}}, gfx90a).origin(),
                Origin::prebuilt);
  EXPECT_EQ(rt.counters().compiled, 0u);
}

// A set declaring more parameters than its kernel takes: each failure is said in the template's
// terms, with the compiler's log in --json (what `kjit prebuild -v` prints).
TEST_F(PrebuildCliTest, ASetWhoseParamsDoNotFitItsKernelFailsInTheTemplatesTerms) {
  write_source("two.hip", "template <typename T, int N> __global__ void two(T *x) { x[0] = N; }\n");
  const std::string set = write_source("three.json", R"({"name": "three", "level": 1,
          "templates": [{"name": "two", "source": "two.hip", "params": ["T", "N", "X"]}],
          "variants": [{"template": "two", "params": {"T": "float", "N": 1, "X": [1, 2]}}]})");
  const CliRun run =
      kjit("prebuild --json --sets " + set + " --targets gfx90a --out " + (dir / "tier").string());
  EXPECT_EQ(run.status, 1) << run.err;
  const nlohmann::json failures = nlohmann::json::parse(run.out).at("failures");
  ASSERT_EQ(failures.size(), 2u) << run.out;
  for (const nlohmann::json &failure : failures) {
    EXPECT_NE(failure.at("what").get<std::string>().find(
                  ": template two: the kernel template two takes 2 parameters (typename T, int "
                  "N), the schema declares 3 (T, N, X)"),
              std::string::npos)
        << failure;
    EXPECT_NE(failure.at("log").get<std::string>().find("compilation for gfx90a failed"),
              std::string::npos)
        << failure;
  }
}

TEST_F(PrebuildCliTest, FailuresSharingOneErrorAreOneLine) {
  write_source("refused.hip", "template <typename T, int N> __global__ void refused(T *x) {\n"
                              "  static_assert(sizeof(T) == 0, \"always refused\");\n}\n");
  const std::string set = write_source("refused.json", R"({"name": "refused", "level": 1,
          "templates": [{"name": "refused", "source": "refused.hip", "params": ["T", "N"]}],
          "variants": [{"template": "refused", "params": {"T": "float", "N": [1, 2, 3]}}]})");
  const CliRun run =
      kjit("prebuild --sets " + set + " --targets gfx90a --out " + (dir / "tier").string());
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("kjit: 3 of 3 variants not built:\n  3 variants, the first refused "
                         "(N=1,T=float) for gfx90a: "),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("(N=2,T=float)"), std::string::npos) << run.err;
}

TEST_F(PrebuildCliTest, TheCompilersLogOfTheFirstFailureOfEachTemplateIsShown) {
  write_source("refused.hip", "template <typename T, int N> __global__ void refused(T *x) {\n"
                              "  static_assert(N == 0, \"N must be zero\");\n}\n");
  const std::string set = write_source("refused.json", R"({"name": "refused", "level": 1,
          "templates": [{"name": "refused", "source": "refused.hip", "params": ["T", "N"]}],
          "variants": [{"template": "refused", "params": {"T": "float", "N": [1, 2]}}]})");
  const std::string args = "prebuild --sets " + set + " --targets gfx90a --out ";
  auto logs = [](const std::string &text) {
    std::size_t count = 0;
    for (std::size_t at = 0; (at = text.find("the compiler's log for", at)) != std::string::npos;
         ++at)
      ++count;
    return count;
  };
  const CliRun first = kjit(args + (dir / "one").string());
  EXPECT_EQ(first.status, 1);
  EXPECT_EQ(logs(first.err), 1u) << first.err;
  EXPECT_NE(first.err.find("the compiler's log for refused (N=1,T=float) for gfx90a"),
            std::string::npos)
      << first.err;
  // Numbered with the template's own lines: the static_assert is its line 2.
  EXPECT_NE(first.err.find("N must be zero"), std::string::npos) << first.err;
  const CliRun verbose = kjit(args + (dir / "two").string() + " --verbose");
  EXPECT_EQ(logs(verbose.err), 2u) << verbose.err;
  const CliRun as_json = kjit(args + (dir / "three").string() + " --json");
  EXPECT_EQ(as_json.status, 1);
  const nlohmann::json failures = nlohmann::json::parse(as_json.out)["failures"];
  ASSERT_EQ(failures.size(), 2u) << as_json.out;
  EXPECT_EQ(failures[0]["template"], "refused");
  EXPECT_NE(failures[0]["log"].get<std::string>().find("N must be zero"), std::string::npos)
      << failures[0];
}

// As in a chroot without /proc: the workers are started by the path kjit was started by.
TEST_F(PrebuildCliTest, WorkersStartWhereProcIsMissing) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // They read their options from /proc/self/environ and LeakSanitizer walks /proc at exit, so a
  // sanitized kjit cannot run without /proc at all; the Release suite runs this test.
  GTEST_SKIP() << "the sanitizers' runtimes need /proc";
#endif
  if (std::system("unshare -m --propagation private true 2>/dev/null") != 0)
    GTEST_SKIP() << "cannot make a mount namespace here (needs root and unshare)";
  const std::string hide_proc =
      write_source("no_proc.sh", "#!/bin/sh\nmount -t tmpfs none /proc || exit 99\nexec \"$@\"\n");
  fs::permissions(hide_proc, fs::perms::owner_all);
  const CliRun run = kjit("prebuild --json --jobs 2 --max-batch 1 --sets " + user_set(2, false) +
                              " --targets gfx90a --out " + (dir / "tier").string(),
                          "unshare -m --propagation private " + hide_proc + " env");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["jobs"], 2);
  EXPECT_EQ(entries(dir / "tier"), 4u);
}

TEST_F(PrebuildCliTest, AVariantThatDoesNotCompileIsListedAndTheOthersAreBuilt) {
  const fs::path tier = dir / "prebuilt";
  const CliRun run =
      kjit("prebuild --sets " + user_set(2, true) + " --targets gfx90a --out " + tier.string());
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("1 of 8 variants not built"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("broken (N=3,T=float) for gfx90a"), std::string::npos) << run.err;
  EXPECT_EQ(entries(tier), 7u) << "four of mine and three of broken";
  const CliRun found = kjit("compile --source " + (dir / "broken.hip").string() +
                                " --kernel broken -p T=float -p N=4 --target gfx90a --json",
                            prebuilt_env(tier));
  ASSERT_EQ(found.status, 0) << found.err;
  EXPECT_EQ(nlohmann::json::parse(found.out)["origin"], "prebuilt");
}

TEST_F(PrebuildCliTest, AVariantForAnotherVendorIsNotBuilt) {
  write_source("mine.hip", "template <int N> __global__ void mine(int *x) { x[0] = N; }\n");
  const std::string set = write_source("vendors.json", R"({"name": "v", "level": 1,
                          "templates": [{"name": "mine", "source": "mine.hip", "params": ["N"]}],
                          "variants": [{"template": "mine", "params": {"N": [1, 2]}},
                                       {"template": "mine", "params": {"N": 3},
                                        "vendors": ["nvidia"]}]})");
  const fs::path tier = dir / "prebuilt";
  const CliRun run =
      kjit("prebuild --json --sets " + set + " --targets gfx90a --out " + tier.string());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out)["variants"], 2) << "N=3 is for NVIDIA targets only";
  EXPECT_EQ(entries(tier), 2u);
}

TEST_F(PrebuildCliTest, BadInputIsOneLineAndExitStatusTwo) {
  const std::string out = " --out " + (dir / "prebuilt").string();
  std::ofstream(dir / "a_file") << "x";
  expect_bad_input("prebuild --targets gfx90a --level 4" + out, "not a level");
  expect_bad_input("prebuild --targets gfx9ff" + out, "gfx9ff is not supported");
  expect_bad_input("prebuild --targets 'gfx90a;GFX90A'" + out, "bad target 'GFX90A'");
  expect_bad_input("prebuild --targets ';'" + out, "names no target");
  expect_bad_input("prebuild --level 2 --targets gfx90a --sets " + user_set(1, false) + out,
                   "level 2 has no variants");
  expect_bad_input("prebuild --targets gfx90a --out " + (dir / "a_file" / "tier").string(),
                   "cannot write the prebuilt tier");
  expect_bad_input("prebuild --targets gfx90a --jobs 0" + out, "--jobs 0");
  const CliRun max_jobs = kjit("prebuild --targets gfx90a" + out, "MAX_JOBS=many");
  EXPECT_EQ(max_jobs.status, 2);
  EXPECT_NE(max_jobs.err.find("MAX_JOBS='many'"), std::string::npos) << max_jobs.err;
  const CliRun level = kjit("prebuild --targets gfx90a" + out, "PREBUILD_KERNELS=9");
  EXPECT_EQ(level.status, 2);
  EXPECT_NE(level.err.find("PREBUILD_KERNELS '9' is not a level"), std::string::npos) << level.err;
  EXPECT_FALSE(fs::exists(dir / "prebuilt" / "v2")) << "nothing was built";
}

} // namespace
} // namespace kjit

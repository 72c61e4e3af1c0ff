// The first-call path end to end with the real compilers: compile, publish, hit in memory, hit
// on disk in a fresh Runtime, single flight, bad entries rewritten, unusable cache directories,
// the prebuilt tier and mode.
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/entry.hpp"
#include "kjit/cache/layout.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/kjit.hpp"
#include "tests/support/file_format.hpp"
#include "tests/support/files.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <barrier>
#include <functional>
#include <gtest/gtest.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

namespace kjit {
namespace {

using testing::LogCapture;
using testing::read_file_bytes;
using testing::TempDir;
using testing::write_file_bytes;

const Template scale("scale", R"(template <typename T, int N>
__global__ void scale(T *x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
})",
                     {{"T", ParamSchema::type({"float", "half", "bfloat16"})},
                      {"N", ParamSchema::integer(1, 1 << 20)}});

const ParamValues half_4096 = {{"T", "half"}, {"N", 4096}};

class RuntimeTest : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      Runtime probe(config());
      probe.compiler(Vendor::amd);
    } catch (const Error &error) {
      GTEST_SKIP() << "hiprtc is not available: " << error.summary();
    }
  }
  Config config() const { return testing::private_config(dir); }
  // gfx90a, and sm_90 where NVRTC loads: a target of each compiler `rt` finds.
  std::vector<jit::Target> compiling_targets(Runtime &rt) const {
    std::vector<jit::Target> targets{gfx90a};
    try {
      rt.compiler(Vendor::nvidia);
      targets.push_back(jit::Target::parse("sm_90"));
    } catch (const Error &) {
    }
    return targets;
  }
  // A damaged entry is a miss with one warning, and the compile that follows rewrites it.
  void expect_rewritten_after(const std::function<void(std::vector<std::byte> &)> &damage) {
    std::filesystem::path entry;
    {
      Runtime rt(config());
      entry = rt.compile(scale, half_4096, gfx90a).entry_path();
    }
    auto bytes = read_file_bytes(entry);
    damage(bytes);
    write_file_bytes(entry, bytes);

    LogCapture captured;
    Runtime rt(config());
    EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::compiled);
    EXPECT_EQ(captured.warnings(), 1) << captured.text();
    EXPECT_NE(captured.text().find(entry.string()), std::string::npos) << captured.text();
    EXPECT_TRUE(cache::decode_entry(read_file_bytes(entry)).entry.has_value())
        << "the entry was rewritten";
    EXPECT_EQ(Runtime(config()).compile(scale, half_4096, gfx90a).origin(), Origin::user_cache);
  }

  TempDir dir;
  const jit::Target gfx90a = jit::Target::parse("gfx90a");
};

TEST_F(RuntimeTest, FirstCallCompilesAndPublishesThenHitsMemory) {
  Runtime rt(config());
  const CodeObject &first = rt.compile(scale, half_4096, gfx90a);
  EXPECT_EQ(first.origin(), Origin::compiled);
  EXPECT_EQ(first.expression(), "scale<__half, 4096>");
  EXPECT_EQ(first.lowered_name(), "_Z5scaleI6__halfLi4096EEvPT_f");
  EXPECT_GT(first.compile_ms(), 0);
  ASSERT_TRUE(std::filesystem::is_regular_file(first.entry_path()));
  EXPECT_EQ(first.entry_path().extension(), ".kjit");

  const CodeObject &again = rt.compile(scale, {{"N", 4096}, {"T", "half"}}, gfx90a);
  EXPECT_EQ(&again, &first) << "the in-memory tier returns the object it holds";
  EXPECT_EQ(rt.counters().compiled, 1u);
}

TEST_F(RuntimeTest, AFreshRuntimeHitsTheDiskWithoutCompiling) {
  std::vector<std::byte> compiled;
  {
    Runtime rt(config());
    const CodeObject &object = rt.compile(scale, half_4096, gfx90a);
    compiled.assign(object.code().begin(), object.code().end());
  }
  Runtime fresh(config());
  const CodeObject &loaded = fresh.compile(scale, half_4096, gfx90a);
  EXPECT_EQ(loaded.origin(), Origin::user_cache);
  EXPECT_EQ(fresh.counters().compiled, 0u);
  EXPECT_EQ(fresh.counters().user_cache_hits, 1u);
  EXPECT_TRUE(
      std::equal(loaded.code().begin(), loaded.code().end(), compiled.begin(), compiled.end()));
  EXPECT_EQ(loaded.lowered_name(), "_Z5scaleI6__halfLi4096EEvPT_f");
}

TEST_F(RuntimeTest, EightThreadsAskingForOneMissingVariantCauseOneCompile) {
  Runtime rt(config());
  constexpr int threads = 8;
  std::barrier start(threads);
  std::vector<const CodeObject *> got(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      start.arrive_and_wait();
      got[t] = &rt.compile(scale, half_4096, gfx90a);
    });
  for (auto &worker : workers)
    worker.join();
  EXPECT_EQ(rt.counters().compiled, 1u);
  for (const CodeObject *object : got)
    EXPECT_EQ(object, got[0]);
}

TEST_F(RuntimeTest, RebuildIgnoresCachedEntries) {
  { Runtime(config()).compile(scale, half_4096, gfx90a); }
  Config rebuild = config();
  rebuild.rebuild = true;
  Runtime rt(rebuild);
  EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::compiled);
}

TEST_F(RuntimeTest, AFlippedByteIsAMissAndTheEntryIsRewritten) {
  expect_rewritten_after([](auto &bytes) { bytes[bytes.size() / 2] ^= std::byte{0x10}; });
}

TEST_F(RuntimeTest, ATruncatedEntryIsAMissAndTheEntryIsRewritten) {
  expect_rewritten_after([](auto &bytes) { bytes.resize(bytes.size() / 3); });
}

// An entry as the first format wrote it (version 1: no `parameters` in the header), found where
// this kjit looks, as a copied or imported cache would put it: a miss with one warning, rewritten.
TEST_F(RuntimeTest, AnEntryOfTheFirstFormatIsAMissAndTheEntryIsRewritten) {
  expect_rewritten_after([](std::vector<std::byte> &bytes) {
    using kjit::testing::append_le, kjit::testing::load_le;
    const std::size_t header_size = load_le(bytes.data() + 12, 4);
    const std::size_t code_size = load_le(bytes.data() + 16, 8);
    const auto *header_text = reinterpret_cast<const char *>(bytes.data() + 24);
    nlohmann::ordered_json header =
        nlohmann::ordered_json::parse(header_text, header_text + header_size);
    ASSERT_TRUE(header.contains("parameters"));
    header.erase("parameters");
    const std::string old_header = header.dump();
    std::vector<std::byte> old(bytes.begin(), bytes.begin() + 8); // the magic
    append_le(old, 1, 4);
    append_le(old, old_header.size(), 4);
    append_le(old, code_size, 8);
    for (char c : old_header)
      old.push_back(static_cast<std::byte>(c));
    old.insert(old.end(), bytes.begin() + 24 + header_size,
               bytes.begin() + 24 + header_size + code_size);
    kjit::testing::append_checksum(old);
    bytes = std::move(old);
  });
}

TEST_F(RuntimeTest, AnUnwritableCacheDirectoryKeepsVariantsInMemoryWithOneWarning) {
  write_file_bytes(dir / "a-file", {});
  Config unwritable = config();
  unwritable.cache_dir = dir / "a-file" / "cache"; // ENOTDIR, even for root
  LogCapture captured;
  Runtime rt(unwritable);
  const CodeObject &first = rt.compile(scale, half_4096, gfx90a);
  const CodeObject &second = rt.compile(scale, {{"T", "float"}, {"N", 64}}, gfx90a);
  EXPECT_EQ(first.origin(), Origin::compiled);
  EXPECT_EQ(second.origin(), Origin::compiled);
  EXPECT_TRUE(first.entry_path().empty());
  EXPECT_FALSE(first.code().empty());
  EXPECT_EQ(captured.warnings(), 1) << captured.text();
}

TEST_F(RuntimeTest, PrebuiltModeNeverCompilesAndNamesTheCommandThatWould) {
  Config prebuilt = config();
  prebuilt.mode = Mode::prebuilt;
  Runtime rt(prebuilt);
  try {
    rt.compile(scale, half_4096, gfx90a);
    FAIL() << "a miss in prebuilt mode compiled";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::not_prebuilt);
    EXPECT_NE(error.summary().find("scale (N=4096,T=half) for gfx90a"), std::string::npos)
        << error.summary();
    EXPECT_NE(error.summary().find("kjit prebuild --sets FILE --targets \"gfx90a\""),
              std::string::npos)
        << error.summary();
  }
  EXPECT_EQ(rt.counters().compiled, 0u);
}

TEST_F(RuntimeTest, ThePrebuiltTierServesFirstAndIsNeverWritten) {
  Config filler = config();
  filler.cache_dir = dir / "prebuilt";
  { Runtime(filler).compile(scale, half_4096, gfx90a); }

  Config reader = config();
  reader.prebuilt_dir = dir / "prebuilt";
  reader.mode = Mode::prebuilt;
  Runtime rt(reader);
  EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::prebuilt);
  EXPECT_EQ(rt.counters().prebuilt_hits, 1u);
  EXPECT_FALSE(std::filesystem::exists(cache::Layout(dir / "cache").version_directory()));
}

TEST_F(RuntimeTest, PrebuiltModeHitsAreCountedInAWritableUserTiersStatistics) {
  Config filler = config();
  filler.cache_dir = dir / "prebuilt";
  { Runtime(filler).compile(scale, half_4096, gfx90a); }
  const cache::DiskStore user(dir / "cache", cache::Access::read_write);
  std::filesystem::create_directories(user.layout().version_directory()); // a user tier there is
  Config reader = config();
  reader.prebuilt_dir = dir / "prebuilt";
  reader.mode = Mode::prebuilt;
  for (int process = 0; process < 2; ++process) {
    Runtime rt(reader);
    EXPECT_EQ(rt.compile(scale, half_4096, gfx90a).origin(), Origin::prebuilt);
  }
  EXPECT_EQ(cache::StatsFiles(user.layout().stats_directory()).total().prebuilt_hits, 2u);
  const auto written = testing::tree(dir / "cache");
  EXPECT_TRUE(std::none_of(written.begin(), written.end(), [](const std::string &path) {
    return path.ends_with(".kjit");
  })) << "no entry is written in prebuilt mode";
}

// An entry for gfx90a placed where the gfx908 entry belongs is never loaded for gfx908.
TEST_F(RuntimeTest, AnEntryForAnotherTargetIsNeverLoaded) {
  const auto gfx908 = jit::Target::parse("gfx908");
  std::filesystem::path gfx908_path, gfx90a_path;
  {
    Runtime rt(config());
    gfx908_path = rt.compile(scale, half_4096, gfx908).entry_path();
    gfx90a_path = rt.compile(scale, half_4096, gfx90a).entry_path();
  }
  std::filesystem::copy_file(gfx90a_path, gfx908_path,
                             std::filesystem::copy_options::overwrite_existing);
  Config prebuilt = config();
  prebuilt.mode = Mode::prebuilt;
  LogCapture captured;
  Runtime rt(prebuilt);
  EXPECT_THROW(rt.compile(scale, half_4096, gfx908), Error);
  EXPECT_EQ(captured.warnings(), 1) << captured.text();
}

TEST_F(RuntimeTest, BadInputsAreClearErrors) {
  Runtime rt(config());
  auto expect_code = [&](const std::function<void()> &action, Errc code) {
    try {
      action();
      ADD_FAILURE() << "no error, expected " << to_string(code);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), code) << error.what();
    }
  };
  expect_code([&] { rt.compile(scale, {{"T", "double"}, {"N", 4}}, gfx90a); }, Errc::bad_parameter);
  expect_code([&] { rt.compile(scale, half_4096, jit::Target::parse("gfx9ff")); },
              Errc::unsupported_target);
  expect_code([&] { rt.compile(scale, half_4096, jit::Target::parse("gfx1030:xnack+")); },
              Errc::unsupported_target);
  const Template with_include_path("t", "__global__ void t() {}", {},
                                   {.compile_options = {"-I/usr/include"}});
  expect_code([&] { rt.compile(with_include_path, {}, gfx90a); }, Errc::bad_option);
  EXPECT_EQ(rt.counters().compiled, 0u);
}

TEST_F(RuntimeTest, ACompileErrorShowsTheLogWithTheTemplatesLineNumbers) {
  const Template broken("broken",
                        "template <int N>\n__global__ void broken(int *x) {\n"
                        "  x[0] = N + undeclared_name;\n}\n",
                        {{"N", ParamSchema::integer(0, 10)}});
  Runtime rt(config());
  try {
    rt.compile(broken, {{"N", 1}}, gfx90a);
    FAIL() << "the broken template compiled";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::compile_error);
    EXPECT_NE(error.detail().find("broken.hip:3:"), std::string::npos) << error.detail();
    EXPECT_NE(error.detail().find("undeclared_name"), std::string::npos) << error.detail();
  }
  EXPECT_FALSE(std::filesystem::exists(cache::Layout(dir / "cache").version_directory() / "gfx90a"))
      << "nothing is published for a failed compile";
}

// A library's template names its source by the author's path (TemplateOptions::source_name): the
// compiler's own log lines and the excerpt name that file, on every compiler found.
TEST_F(RuntimeTest, ACompileErrorNamesTheAuthorsSourceFile) {
  const Template broken("mylib_broken",
                        "template <int N>\n__global__ void mylib_broken(int *x) {\n"
                        "  x[0] = N + undeclared_name;\n}\n",
                        {{"N", ParamSchema::integer(0, 10)}},
                        {.source_name = "kernels/broken.hip"});
  Runtime rt(config());
  for (const jit::Target &target : compiling_targets(rt)) {
    try {
      rt.compile(broken, {{"N", 1}}, target);
      ADD_FAILURE() << "the broken template compiled for " << target.id();
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::compile_error);
      EXPECT_EQ(error.summary().rfind("kernels/broken.hip: compilation for ", 0), 0u)
          << error.summary();
      // clang's "kernels/broken.hip:3:14: error", NVRTC's "kernels/broken.hip(3): error".
      const bool amd = target.vendor() == Vendor::amd;
      EXPECT_NE(error.detail().find(amd ? "kernels/broken.hip:3:" : "kernels/broken.hip(3): "),
                std::string::npos)
          << error.detail();
      EXPECT_NE(error.detail().find("kernels/broken.hip:3:\n"), std::string::npos)
          << "the excerpt: " << error.detail();
      EXPECT_EQ(error.detail().find("mylib_broken.hip"), std::string::npos) << error.detail();
    }
  }
}

// A schema that does not fit the kernel, or a kernel name the source lacks, fails the compile
// with one line in the template's terms, not the compilers' text about the name expression
// (hiprtc's `__hiprtc_1` and `<overloaded function type>`, NVRTC's `__nv_name_map`).
TEST_F(RuntimeTest, AKernelThatDoesNotFitItsSchemaIsSaidInTheTemplatesTerms) {
  const Template three("three", scale.source(),
                       {{"T", ParamSchema::type({"float"})},
                        {"N", ParamSchema::integer(1, 8)},
                        {"X", ParamSchema::integer(1, 8)}},
                       {.kernel = "scale"});
  const Template misnamed("misnamed", scale.source(),
                          {{"T", ParamSchema::type({"float"})}, {"N", ParamSchema::integer(1, 8)}},
                          {.kernel = "scael"});
  Runtime rt(config());
  const std::vector<jit::Target> targets = compiling_targets(rt);
  for (const jit::Target &target : targets) {
    try {
      rt.compile(three, {{"T", "float"}, {"N", 4}, {"X", 1}}, target);
      ADD_FAILURE() << "compiled";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::compile_error);
      EXPECT_EQ(error.summary(), "template three: the kernel template scale takes 2 parameters "
                                 "(typename T, int N), the schema declares 3 (T, N, X)")
          << target.id();
      EXPECT_NE(error.detail().find("compilation for " + target.id() + " failed"),
                std::string::npos)
          << "the compiler's own message and log stay in the detail: " << error.detail();
    }
    try {
      rt.compile(misnamed, {{"T", "float"}, {"N", 4}}, target);
      ADD_FAILURE() << "compiled";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::compile_error);
      EXPECT_EQ(error.summary(), "template misnamed: the source declares no kernel named scael "
                                 "(the template's kernel; TemplateOptions::kernel, a set's "
                                 "\"kernel\")")
          << target.id();
    }
  }
}

// A signature of structs is checked against the compiled kernel's own record of its arguments,
// on a machine without a GPU: rt.kernel would need a device first.
TEST_F(RuntimeTest, ASignatureIsCheckedAgainstTheCodeObjectWithoutADevice) {
  struct Tile {
    int rows, cols, stride;
  };
  const Template tiled("tiled", R"(struct Tile { int rows, cols, stride; };
template <typename T> __global__ void tiled(T *x, Tile tile, float a) {
  x[tile.rows * tile.stride + tile.cols] *= a;
})",
                       {{"T", ParamSchema::type({"float", "half"})}},
                       {.arguments = {"T*", "Tile", "float"}});
  const Template declared("declared", scale.source(),
                          {{"T", ParamSchema::type({"half"})}, {"N", ParamSchema::integer(1, 8)}},
                          {.kernel = "scale", .arguments = {"T*", "double"}});
  Runtime rt(config());
  const std::vector<jit::Target> targets = compiling_targets(rt);
  const ParamValues floats{{"T", "float"}};
  for (const jit::Target &target : targets) {
    EXPECT_NO_THROW(
        rt.check_signature(tiled, floats, target, KernelSignature::of<float *, Tile, float>()))
        << target.id();
    try {
      rt.check_signature(tiled, floats, target, KernelSignature::of<float *, int, float>());
      ADD_FAILURE() << "a 4-byte int passed for a 12-byte Tile on " << target.id();
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      EXPECT_EQ(error.summary(), "tiled<float>: the kernel takes 3 arguments of 8, 12, 4 bytes, "
                                 "the signature (float*, int, float) names 3 arguments "
                                 "of 8, 4, 4 bytes")
          << target.id();
    }
    try {
      rt.check_signature(declared, {{"T", "half"}, {"N", 4}}, target);
      ADD_FAILURE() << "the template declares a double where the kernel takes a float";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      EXPECT_NE(error.summary().find("the kernel takes 2 arguments of 8, 4 bytes"),
                std::string::npos)
          << error.summary();
    }
  }
}

// What a Runtime did is in the cache's statistics once it ends, for `kjit cache stats`.
TEST_F(RuntimeTest, EachRuntimeLeavesItsCountsInTheCacheStatistics) {
  const cache::StatsFiles stats(cache::Layout(dir / "cache").stats_directory());
  { Runtime(config()).compile(scale, half_4096, gfx90a); }
  cache::CacheCounters after_compile = stats.total();
  EXPECT_EQ(after_compile.misses, 1u);
  EXPECT_EQ(after_compile.compiles, 1u);
  EXPECT_GT(after_compile.compile_ms, 0);
  EXPECT_EQ(after_compile.user_hits, 0u);
  {
    Runtime rt(config());
    rt.compile(scale, half_4096, gfx90a);
    rt.compile(scale, half_4096, gfx90a); // a memory hit: not counted
  }
  const cache::CacheCounters after_hit = stats.total();
  EXPECT_EQ(after_hit.user_hits, 1u);
  EXPECT_EQ(after_hit.compiles, 1u);
  EXPECT_DOUBLE_EQ(after_hit.saved_ms, after_compile.compile_ms)
      << "a hit saves the compile time its entry recorded";
}

// A Runtime that compiled leaves the user tier within its bound, least recently used out first.
// What the prelude promises on every release: the fixed-width integer types, which NVRTC lacks and
// hiprtc 5.2 has only in part (and whose <cstdint> does not compile there).
TEST_F(RuntimeTest, ThePreludeProvidesTheFixedWidthIntegerTypes) {
  const Template widths{"widths",
                        R"(template <int N>
__global__ void widths(int8_t *a, uint8_t *b, int16_t *c, uint16_t *d, int32_t *e,
                       std::uint32_t *f, int64_t *g, uint64_t *h) {
  static_assert(sizeof(int8_t) == 1 && sizeof(uint16_t) == 2 && sizeof(std::int32_t) == 4 &&
                sizeof(int64_t) == 8 && sizeof(uint64_t) == 8, "fixed widths");
  *g = *a + *b + *c + *d + *e + *f + N;
  *h = static_cast<uint64_t>(*g);
})",
                        {{"N", ParamSchema::integer(1, 8)}}};
  Runtime rt(config());
  EXPECT_EQ(rt.compile(widths, {{"N", 1}}, gfx90a).origin(), Origin::compiled);
  try {
    rt.compiler(Vendor::nvidia);
  } catch (const Error &error) {
    GTEST_SKIP() << "hiprtc checked; NVRTC is not available: " << error.summary();
  }
  EXPECT_EQ(rt.compile(widths, {{"N", 1}}, jit::Target::parse("sm_90")).origin(), Origin::compiled);
}

// Which standard headers a kernel may include after the prelude, per compiler release: the table
// docs/ARCHITECTURE.md ("The prelude's contract") and README.md state, each entry a compile here.
// A release the table does not know fails with what it found, so that a new one gets its row.
TEST_F(RuntimeTest, TheStandardHeadersThatCompileAreThoseTheContractStates) {
  const std::vector<std::string> headers = {"cstdint", "stdint.h", "type_traits",      "limits",
                                            "cmath",   "math.h",   "climits",          "cfloat",
                                            "cstddef", "utility",  "initializer_list", "new"};
  // Release -> the headers above that compile; all the others fail.
  const std::map<std::string, std::set<std::string>> contract = {
      {"hiprtc, ROCm 5.2", {"limits", "climits", "cfloat", "cstddef", "initializer_list", "new"}},
      {"hiprtc, ROCm 6.4", {}},
      {"hiprtc, ROCm 7.2", {}},
      {"nvrtc 13.0", {}},
  };
  Runtime rt(config());
  for (const jit::Target &target : compiling_targets(rt)) {
    const std::string release = rt.compiler(target.vendor()).release();
    std::set<std::string> compiled;
    for (const std::string &header : headers) {
      const Template includes(
          "includes", "#include <" + header + ">\n" + scale.source(),
          {{"T", ParamSchema::type({"float"})}, {"N", ParamSchema::integer(1, 8)}},
          {.kernel = "scale"});
      try {
        rt.compile(includes, {{"T", "float"}, {"N", 1}}, target);
        compiled.insert(header);
      } catch (const Error &error) {
        EXPECT_EQ(error.code(), Errc::compile_error) << header << ": " << error.what();
      }
    }
    const auto stated = contract.find(release);
    std::string found;
    for (const std::string &header : compiled)
      found += " <" + header + ">";
    ASSERT_NE(stated, contract.end())
        << release
        << " has no row in the contract; it compiles:" << (found.empty() ? " none" : found);
    EXPECT_EQ(compiled, stated->second) << release << " compiles:" << found;
  }
}

TEST_F(RuntimeTest, KjitCacheSizeKeepsTheUserTierWithinItsBound) {
  std::uintmax_t one_entry = 0;
  {
    Runtime rt(config());
    one_entry = std::filesystem::file_size(rt.compile(scale, half_4096, gfx90a).entry_path());
  }
  Config bounded = config();
  bounded.cache_size_bytes = 2 * one_entry + one_entry / 2; // room for two entries
  for (int n : {1, 2, 3}) {
    Runtime rt(bounded);
    rt.compile(scale, {{"T", "half"}, {"N", n}}, gfx90a);
  }
  const cache::DiskStore store(dir / "cache", cache::Access::read_only);
  std::uintmax_t total = 0;
  for (const cache::StoredEntry &entry : cache::scan(store))
    total += entry.bytes;
  EXPECT_LE(total, bounded.cache_size_bytes);
  EXPECT_EQ(cache::scan(store).size(), 2u);
  EXPECT_EQ(Runtime(config()).compile(scale, {{"T", "half"}, {"N", 3}}, gfx90a).origin(),
            Origin::user_cache)
      << "the most recent entry stays";
}

// Every built-in template written for some targets refuses the others before any compiler is
// asked for, in one line naming the targets it builds for.
TEST(TemplateTargets, EveryTargetSpecificTemplateRefusesOtherTargetsBeforeAnyCompiler) {
  TempDir dir;
  Config config = testing::private_config(dir);
  int asked = 0;
  config.compilers = [&](Vendor) -> const jit::Compiler & {
    ++asked;
    throw Error(Errc::compiler_unavailable, "no compiler in this test");
  };
  Runtime rt(config);
  std::vector<std::string> specific;
  for (const Template &tmpl : templates::builtin()) {
    if (tmpl.targets().empty())
      continue;
    specific.push_back(tmpl.name());
    int refused = 0;
    for (const char *text : {"gfx90a", "gfx942", "gfx11-generic", "sm_75", "sm_90", "sm_90a"}) {
      const jit::Target target = jit::Target::parse(text);
      if (tmpl.builds_for(target.vendor(), target.arch()))
        continue;
      ++refused;
      try {
        rt.compile(tmpl, {}, target);
        ADD_FAILURE() << tmpl.name() << " for " << text << ": no error";
      } catch (const Error &error) {
        EXPECT_EQ(error.code(), Errc::unsupported_target) << error.summary();
        EXPECT_TRUE(error.summary().starts_with("template " + tmpl.name() + " builds only for ") &&
                    error.summary().ends_with(", not " + target.arch()))
            << error.summary();
      }
    }
    EXPECT_GT(refused, 0) << tmpl.name();
  }
  EXPECT_EQ(specific, (std::vector<std::string>{
                          "dynamic_per_token_quant_fp8", "flash_attention", "flash_attention_mfma",
                          "flash_attention_mma", "gemm_fp8", "gemm_fp8_mfma", "gemm_mfma",
                          "gemm_mma", "gemm_wgmma", "linear_skinny", "linear_splitk",
                          "moe_gemm_fp8", "moe_gemm_mfma", "moe_gemm_wgmma", "moe_quantize_fp8"}));
  EXPECT_EQ(asked, 0);
}

} // namespace
} // namespace kjit

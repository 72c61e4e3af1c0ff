// Templates with include directories end to end through a Runtime (with a compiler that runs no
// vendor library): the key covers every header a compile could read, through the header manifest
// beside the entries (docs/ARCHITECTURE.md, "Header libraries").
#include "fake_compiler.hpp"
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/redis_remote.hpp"
#include "kjit/cache/remote_url.hpp"
#include "kjit/kjit.hpp"
#include "runtime/src/include_scan.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/redis_server.hpp"
#include "tests/support/temp_dir.hpp"

#include <barrier>
#include <chrono>
#include <fstream>
#include <gtest/gtest.h>
#include <thread>

namespace kjit {
namespace {

using testing::FakeCompiler;
using testing::LogCapture;
using testing::TempDir;

void write_text(const std::filesystem::path &path, const std::string &text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A copy of the directory tree `from` at `to`, its parents made.
void copy_tree(const std::filesystem::path &from, const std::filesystem::path &to) {
  std::filesystem::create_directories(to.parent_path());
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
}

// Captures info lines too: a header that changed is reported at info level.
class InfoCapture : public LogCapture {
public:
  InfoCapture() : level_(log().level()) { log().set_level(spdlog::level::info); }
  ~InfoCapture() { log().set_level(level_); }

private:
  spdlog::level::level_enum level_;
};

const char *kSource = R"(#include <lib/api.h>
template <typename T> __global__ void k(T *x) { x[0] = lib::twice(x[0]); })";

class HeaderLibraryTest : public ::testing::Test {
protected:
  void SetUp() override {
    write_text(dir / "inc0/lib/api.h", "#pragma once\n#include <lib/detail/impl.h>\n");
    write_text(dir / "inc1/lib/detail/impl.h", "namespace lib { int twice(int); }\n");
    compiler.targets.push_back({"gfx1030", {}});
  }
  Config config() const {
    Config config = testing::private_config(dir);
    config.compilers = [this](Vendor) -> const jit::Compiler & { return compiler; };
    return config;
  }
  Template make(std::string source = kSource) const {
    return Template("k", std::move(source), {{"T", ParamSchema::type({"float", "int"})}},
                    {.include_dirs = {(dir / "inc0").string(), (dir / "inc1").string()}});
  }
  Origin origin_in_fresh_runtime(const Template &tmpl, const ParamValues &params = {{"T", "float"}},
                                 const char *target = "gfx90a") {
    Runtime rt(config());
    return rt.compile(tmpl, params, jit::Target::parse(target)).origin();
  }
  // The next lookup in a fresh Runtime is a miss, logged with `why` ("lib/x.h (include
  // directory 1) changed").
  void expect_miss_naming(const Template &tmpl, const std::string &why) {
    InfoCapture captured;
    EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::compiled);
    EXPECT_NE(captured.text().find(why), std::string::npos) << captured.text();
  }
  std::optional<cache::HeaderManifest> manifest_of(const CodeObject &object) {
    const cache::DiskStore store(dir / "cache", cache::Access::read_only);
    for (const auto &entry : std::filesystem::recursive_directory_iterator(dir / "cache"))
      if (entry.path().extension() == ".manifest") {
        auto base = cache::Key::from_hex(entry.path().stem().string());
        auto found = store.read_manifest(*base, object.target().id());
        if (found.manifest)
          for (const auto &result : found.manifest->results)
            if (result.key == object.key())
              return found.manifest;
      }
    return std::nullopt;
  }

  jit::CompileRequest request(std::string source, std::vector<std::string> include_dirs) const {
    return {.program_name = "k.hip",
            .source = std::move(source),
            .pre_includes = {},
            .headers = {},
            .include_dirs = std::move(include_dirs),
            .name_expressions = {},
            .options = {},
            .target = jit::Target::parse("gfx90a")};
  }
  std::vector<std::string> dirs() const {
    return {(dir / "inc0").string(), (dir / "inc1").string()};
  }

  TempDir dir;
  FakeCompiler compiler;
};

TEST_F(HeaderLibraryTest, AnEditTwoLevelsDeepIsAMissNamingTheHeaderThenAHit) {
  const Template tmpl = make();
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::compiled);
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::user_cache);
  write_text(dir / "inc1/lib/detail/impl.h", "namespace lib { int twice(long); }\n");
  expect_miss_naming(tmpl, "lib/detail/impl.h (include directory 1) changed");
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::user_cache);
  EXPECT_EQ(compiler.compiles, 2);
  // Back to the first content: the manifest still holds that compile's result.
  write_text(dir / "inc1/lib/detail/impl.h", "namespace lib { int twice(int); }\n");
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::user_cache);
  EXPECT_EQ(compiler.compiles, 2);
}

TEST_F(HeaderLibraryTest, TheMemoryTierIsUnchangedWithinARuntime) {
  const Template tmpl = make();
  Runtime rt(config());
  const CodeObject &first = rt.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a"));
  write_text(dir / "inc1/lib/detail/impl.h", "changed\n");
  EXPECT_EQ(&rt.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a")), &first);
}

TEST_F(HeaderLibraryTest, ATouchedHeaderStillHitsAndItsStampIsWrittenBack) {
  const Template tmpl = make();
  std::this_thread::sleep_for(std::chrono::milliseconds(200)); // stamps recorded on the miss
  Runtime rt(config());
  const CodeObject &object = rt.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a"));
  const auto before = manifest_of(object);
  ASSERT_TRUE(before);
  std::filesystem::last_write_time(dir / "inc1/lib/detail/impl.h",
                                   std::filesystem::file_time_type::clock::now());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::user_cache);
  const auto after = manifest_of(object);
  ASSERT_TRUE(after);
  EXPECT_NE(before->results.back().headers, after->results.back().headers)
      << "the touched header's new stamp is recorded, so the next lookup does not read it";
  EXPECT_EQ(cache::check_headers(after->results.back().headers, dirs()).rehashed, 0u);
}

TEST_F(HeaderLibraryTest, AShadowingHeaderAddedEarlierOnThePathIsAMiss) {
  const Template tmpl = make();
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::compiled);
  write_text(dir / "inc0/lib/detail/impl.h", "namespace lib { int twice(int); }\n");
  expect_miss_naming(tmpl, "lib/detail/impl.h (include directory 0) was added");
}

TEST_F(HeaderLibraryTest, AVanishedHeaderIsAMiss) {
  const Template tmpl = make();
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::compiled);
  std::filesystem::remove(dir / "inc1/lib/detail/impl.h");
  expect_miss_naming(tmpl, "lib/detail/impl.h (include directory 1) vanished");
}

// The preprocessor cannot see template parameters, so what a variant includes depends on what it
// is compiled with (here the target's KJIT_WARP_SIZE). Each variant keeps a manifest of its own;
// the scanner follows both branches of an #if, so each records both headers: an edit in the
// branch not taken is a miss too (conservative, never stale).
TEST_F(HeaderLibraryTest, ConditionalIncludesGiveEachVariantItsOwnManifest) {
  write_text(dir / "inc0/wave64.h", "int wave64;\n");
  write_text(dir / "inc0/wave32.h", "int wave32;\n");
  const Template tmpl = make(R"(#if KJIT_WARP_SIZE == 64
#include "wave64.h"
#else
#include <wave32.h>
#endif
template <typename T> __global__ void k(T *x) {})");
  Runtime rt(config());
  const CodeObject &wide = rt.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a"));
  const CodeObject &narrow = rt.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx1030"));
  const auto wide_manifest = manifest_of(wide), narrow_manifest = manifest_of(narrow);
  ASSERT_TRUE(wide_manifest && narrow_manifest);
  EXPECT_NE(wide_manifest->base, narrow_manifest->base);
  for (const auto *manifest : {&*wide_manifest, &*narrow_manifest}) {
    std::vector<std::string> found;
    for (const auto &header : manifest->results.back().headers)
      if (header.digest)
        found.push_back(header.path);
    EXPECT_EQ(found, (std::vector<std::string>{"wave32.h", "wave64.h"}));
  }
  write_text(dir / "inc0/wave32.h", "int wave32_changed;\n");
  EXPECT_EQ(origin_in_fresh_runtime(tmpl, {{"T", "float"}}, "gfx1030"), Origin::compiled);
  EXPECT_EQ(origin_in_fresh_runtime(tmpl, {{"T", "float"}}, "gfx90a"), Origin::compiled);
}

TEST_F(HeaderLibraryTest, ACorruptOrForgedManifestIsAMissWithOneWarningAndIsRewritten) {
  const Template tmpl = make();
  Runtime first(config());
  const CodeObject &object = first.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a"));
  std::filesystem::path path;
  for (const auto &entry : std::filesystem::recursive_directory_iterator(dir / "cache"))
    if (entry.path().extension() == ".manifest")
      path = entry.path();
  ASSERT_FALSE(path.empty());
  // Forged: the header's path climbs out of its directory to a file with the recorded digest.
  cache::HeaderManifest forged = *manifest_of(object);
  write_text(dir / "outside.h", "namespace lib { int twice(int); }\n");
  for (auto &header : forged.results.back().headers)
    if (header.path == "lib/detail/impl.h" && header.digest)
      header.path = "../outside.h";
  for (const std::string &text :
       {std::string("kjit-header-manifest 1\ngarbage"), cache::encode_manifest(forged)}) {
    write_text(path, text);
    LogCapture captured;
    EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::compiled);
    EXPECT_EQ(captured.warnings(), 1) << captured.text();
    EXPECT_NE(captured.text().find(path.string()), std::string::npos) << captured.text();
    EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::user_cache) << "rewritten";
  }
}

TEST_F(HeaderLibraryTest, IncludeDirectoriesThatCannotBeReadAreClearErrors) {
  write_text(dir / "a-file", "");
  for (const std::filesystem::path &bad : {dir / "missing", dir / "a-file"}) {
    try {
      Template("k", kSource, {}, {.include_dirs = {bad.string()}});
      ADD_FAILURE() << bad;
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::file_io);
      EXPECT_NE(error.summary().find(bad.string()), std::string::npos) << error.summary();
    }
  }
  Config config = this->config();
  config.include_dirs = {(dir / "missing").string()};
  try {
    Runtime rt(config);
    ADD_FAILURE() << "a missing KJIT_INCLUDE_PATH directory";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_NE(error.summary().find("KJIT_INCLUDE_PATH"), std::string::npos) << error.summary();
  }
}

TEST_F(HeaderLibraryTest, ARuntimesIncludeDirectoriesAreSearchedAfterTheTemplates) {
  const Template own("k", kSource, {{"T", ParamSchema::type({"float"})}},
                     {.include_dirs = {(dir / "inc0").string()}});
  Config config = this->config();
  config.include_dirs = {(dir / "inc1").string()};
  Runtime rt(config);
  const CodeObject &object = rt.compile(own, {{"T", "float"}}, jit::Target::parse("gfx90a"));
  const auto manifest = manifest_of(object);
  ASSERT_TRUE(manifest);
  EXPECT_EQ(manifest->dirs, 2u);
  write_text(dir / "inc1/lib/detail/impl.h", "changed\n");
  Runtime again(config);
  EXPECT_EQ(again.compile(own, {{"T", "float"}}, jit::Target::parse("gfx90a")).origin(),
            Origin::compiled);
}

TEST_F(HeaderLibraryTest, TwoRuntimesCompilingAtOnceCompileOnce) {
  compiler.compile_delay = std::chrono::milliseconds(200);
  const Template tmpl = make();
  std::barrier start(2);
  std::vector<Origin> origins(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      Runtime rt(config());
      start.arrive_and_wait();
      origins[i] = rt.compile(tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a")).origin();
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(compiler.compiles, 1);
  EXPECT_EQ(std::count(origins.begin(), origins.end(), Origin::compiled), 1);
}

// Two copies of the library that differ, compiled at once into one cache: each compile adds its
// result to the one manifest under the base key's lock, and neither loses the other's.
TEST_F(HeaderLibraryTest, TwoLibrariesCompilingAtOnceBothKeepTheirResults) {
  compiler.compile_delay = std::chrono::milliseconds(200);
  copy_tree(dir / "inc0", dir / "copy/inc0");
  copy_tree(dir / "inc1", dir / "copy/inc1");
  write_text(dir / "copy/inc1/lib/detail/impl.h", "namespace lib { int twice(long); }\n");
  const Template copy(
      "k", kSource, {{"T", ParamSchema::type({"float", "int"})}},
      {.include_dirs = {(dir / "copy/inc0").string(), (dir / "copy/inc1").string()}});
  const Template original = make();
  std::barrier start(2);
  std::vector<std::thread> threads;
  for (const Template *tmpl : {&original, &copy})
    threads.emplace_back([&, tmpl] {
      Runtime rt(config());
      start.arrive_and_wait();
      rt.compile(*tmpl, {{"T", "float"}}, jit::Target::parse("gfx90a"));
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(compiler.compiles, 2);
  EXPECT_EQ(origin_in_fresh_runtime(original), Origin::user_cache);
  Runtime rt(config());
  EXPECT_EQ(rt.compile(copy, {{"T", "float"}}, jit::Target::parse("gfx90a")).origin(),
            Origin::user_cache);
  EXPECT_EQ(compiler.compiles, 2);
}

TEST_F(HeaderLibraryTest, AByteIdenticalCopyElsewhereServesAPrebuiltTier) {
  const Template tmpl = make();
  EXPECT_EQ(origin_in_fresh_runtime(tmpl), Origin::compiled);
  std::filesystem::create_directories(dir / "elsewhere");
  copy_tree(dir / "inc0", dir / "elsewhere/inc0");
  copy_tree(dir / "inc1", dir / "elsewhere/inc1");
  const Template moved(
      "k", kSource, {{"T", ParamSchema::type({"float", "int"})}},
      {.include_dirs = {(dir / "elsewhere/inc0").string(), (dir / "elsewhere/inc1").string()}});
  Config config = this->config();
  config.prebuilt_dir = config.cache_dir;
  config.cache_dir = dir / "other-user-tier";
  config.mode = Mode::prebuilt;
  Runtime rt(config);
  EXPECT_EQ(rt.compile(moved, {{"T", "float"}}, jit::Target::parse("gfx90a")).origin(),
            Origin::prebuilt);
  write_text(dir / "elsewhere/inc1/lib/detail/impl.h", "not the same library\n");
  Runtime changed(config);
  EXPECT_THROW(changed.compile(moved, {{"T", "float"}}, jit::Target::parse("gfx90a")), Error);
}

// Explain through the manifest: the key is the one a lookup and a compile use with the headers
// there now, not the base key (which names no entry), and a changed header is the difference.
TEST_F(HeaderLibraryTest, ExplainShowsTheKeyOfTheHeadersThereNowAndNamesAChangedOne) {
  const Template tmpl = make();
  const jit::Target gfx90a = jit::Target::parse("gfx90a");
  const cache::Key compiled = Runtime(config()).compile(tmpl, {{"T", "float"}}, gfx90a).key();
  const Explanation unchanged = Runtime(config()).explain(tmpl, {{"T", "float"}}, gfx90a);
  EXPECT_EQ(unchanged.key, compiled);
  EXPECT_EQ(unchanged.reason(), "held by the user tier");
  EXPECT_TRUE(std::ranges::any_of(unchanged.key_inputs, [](const cache::KeyField &field) {
    return field.first == "include:1:lib/detail/impl.h";
  }));

  write_text(dir / "inc1/lib/detail/impl.h", "namespace lib { int twice(long); }\n");
  const Explanation changed = Runtime(config()).explain(tmpl, {{"T", "float"}}, gfx90a);
  EXPECT_FALSE(changed.found());
  EXPECT_NE(changed.key, compiled);
  EXPECT_NE(changed.reason().find("differs in header 1:lib/detail/impl.h ("), std::string::npos)
      << changed.reason();
  EXPECT_EQ(Runtime(config()).compile(tmpl, {{"T", "float"}}, gfx90a).key(), changed.key)
      << "the key explained is the one the compile makes";
}

// ---- the remote tier: a real redis-server on a free loopback port
// --------------------------------

// Two machines: each its own disk cache and its own copy of the header library, in different
// places, sharing one Redis.
class HeaderLibraryRemoteTest : public HeaderLibraryTest {
protected:
  void SetUp() override {
    HeaderLibraryTest::SetUp();
    copy_tree(dir / "inc0", other / "lib/a/inc0");
    copy_tree(dir / "inc1", other / "lib/b/inc1");
  }
  // Machine A: the fixture's directory. Machine B: `other`, whose cache is its own.
  Config config_of(const TempDir &machine) const {
    Config config = testing::private_config(machine);
    config.compilers = [this](Vendor) -> const jit::Compiler & { return compiler; };
    config.remote_urls = {redis.url()};
    return config;
  }
  Template on_a() const { return make(); }
  Template on_b() const {
    return Template(
        "k", kSource, {{"T", ParamSchema::type({"float", "int"})}},
        {.include_dirs = {(other / "lib/a/inc0").string(), (other / "lib/b/inc1").string()}});
  }
  Origin origin_on(const TempDir &machine, const Template &tmpl, const char *type = "float") const {
    Runtime rt(config_of(machine));
    return rt.compile(tmpl, {{"T", type}}, jit::Target::parse("gfx90a")).origin();
  }
  // The single manifest record in Redis.
  std::string manifest_name() const {
    const std::vector<std::string> names = redis.keys("kjit/manifest/v1/gfx90a*/*");
    EXPECT_EQ(names.size(), 1u);
    return names.empty() ? std::string() : names.front();
  }
  std::string get(const std::string &name) const {
    auto c = redis.connect_admin();
    auto *reply = static_cast<redisReply *>(redisCommand(c.get(), "GET %s", name.c_str()));
    std::string value =
        reply && reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : "";
    if (reply)
      freeReplyObject(reply);
    return value;
  }
  void set(const std::string &name, const std::string &value) const {
    ASSERT_TRUE(redis.admin("SET %s %b", name.c_str(), value.data(), value.size()));
  }
  cache::HeaderManifest remote_manifest() const {
    const std::string name = manifest_name();
    auto base = cache::Key::from_hex(name.substr(name.rfind('/') + 1));
    return cache::decode_manifest(get(name), *base).manifest.value();
  }
  void put_manifest(const cache::HeaderManifest &manifest) const {
    set(manifest_name(), cache::encode_manifest(manifest));
  }

  TempDir other;
  testing::RedisServer redis;
};

TEST_F(HeaderLibraryRemoteTest, AByteIdenticalLibraryElsewhereSharesAHitThroughRedis) {
  EXPECT_EQ(origin_on(dir, on_a()), Origin::compiled);
  EXPECT_EQ(redis.keys("kjit/entry/v2/gfx90a*/*").size(), 1u);
  const cache::HeaderManifest published = remote_manifest();
  ASSERT_EQ(published.results.size(), 1u);
  for (const cache::RecordedHeader &header : published.results[0].headers)
    EXPECT_FALSE(header.stamp.recorded()) << header.path << ": stamps describe one machine";

  EXPECT_EQ(origin_on(other, on_b()), Origin::remote);
  EXPECT_EQ(compiler.compiles, 1);
  // Kept on B's disk with its manifest: the next process of B finds it there.
  EXPECT_EQ(origin_on(other, on_b()), Origin::user_cache);
  EXPECT_EQ(compiler.compiles, 1);
}

TEST_F(HeaderLibraryRemoteTest, AHeaderEditedOnOneSideIsAMissThereNamingIt) {
  EXPECT_EQ(origin_on(dir, on_a()), Origin::compiled);
  write_text(other / "lib/b/inc1/lib/detail/impl.h", "namespace lib { int twice(long); }\n");
  InfoCapture captured;
  EXPECT_EQ(origin_on(other, on_b()), Origin::compiled);
  EXPECT_EQ(compiler.compiles, 2);
  EXPECT_NE(captured.text().find("in the remote: lib/detail/impl.h (include directory 1) changed"),
            std::string::npos)
      << captured.text();
  // B published its own result beside A's: each side hits its own through Redis.
  EXPECT_EQ(remote_manifest().results.size(), 2u);
  TempDir third;
  copy_tree(other / "lib", third / "lib");
  const Template on_c(
      "k", kSource, {{"T", ParamSchema::type({"float", "int"})}},
      {.include_dirs = {(third / "lib/a/inc0").string(), (third / "lib/b/inc1").string()}});
  EXPECT_EQ(origin_on(third, on_c), Origin::remote);
  EXPECT_EQ(compiler.compiles, 2);
}

TEST_F(HeaderLibraryRemoteTest, ACorruptManifestInRedisIsAMissWithOneWarning) {
  EXPECT_EQ(origin_on(dir, on_a()), Origin::compiled);
  std::string bytes = get(manifest_name());
  bytes[bytes.size() / 2] ^= 0x20;
  set(manifest_name(), bytes);
  {
    testing::LogCapture captured;
    EXPECT_EQ(origin_on(other, on_b()), Origin::compiled);
    EXPECT_EQ(captured.warnings(), 1) << captured.text();
    EXPECT_NE(captured.text().find("header manifest: its checksum does not match"),
              std::string::npos)
        << captured.text();
  }
  // B's compile replaced the value it could not read.
  EXPECT_EQ(remote_manifest().results.size(), 1u);
}

TEST_F(HeaderLibraryRemoteTest, AManifestNamingAPathOutsideItsDirectoriesIsAMissWithOneWarning) {
  EXPECT_EQ(origin_on(dir, on_a()), Origin::compiled);
  cache::HeaderManifest hostile = remote_manifest();
  hostile.results[0].headers[0].path = "../../../etc/passwd"; // checksum valid: encode checks none
  put_manifest(hostile);
  testing::LogCapture captured;
  EXPECT_EQ(origin_on(other, on_b()), Origin::compiled);
  EXPECT_EQ(captured.warnings(), 1) << captured.text();
  EXPECT_NE(captured.text().find("names a path outside its include directory"), std::string::npos)
      << captured.text();
}

// A manifest whose result names another variant's entry, with headers that are all unchanged:
// the entry's key inputs are not those headers over this variant's base key, so it is not loaded.
TEST_F(HeaderLibraryRemoteTest, AManifestNamingAnotherVariantsEntryNeverLoadsIt) {
  EXPECT_EQ(origin_on(dir, on_a(), "int"), Origin::compiled);
  const std::string int_entry = redis.keys("kjit/entry/v2/gfx90a*/*").at(0);
  const auto int_key = cache::Key::from_hex(int_entry.substr(int_entry.rfind('/') + 1)).value();
  ASSERT_TRUE(redis.admin("DEL %s", manifest_name().c_str()));
  EXPECT_EQ(origin_on(dir, on_a(), "float"), Origin::compiled);
  cache::HeaderManifest forged = remote_manifest();
  forged.results[0].key = int_key;
  put_manifest(forged);
  testing::LogCapture captured;
  Runtime rt(config_of(other));
  const CodeObject &object = rt.compile(on_b(), {{"T", "float"}}, jit::Target::parse("gfx90a"));
  EXPECT_EQ(object.origin(), Origin::compiled);
  EXPECT_NE(object.key(), int_key);
  EXPECT_EQ(captured.warnings(), 1) << captured.text();
  EXPECT_NE(captured.text().find("its key inputs are not the headers its manifest names"),
            std::string::npos)
      << captured.text();
}

TEST_F(HeaderLibraryTest, TheScannerRecordsCandidatesOfEveryBranchAndAbsentPlaces) {
  const auto headers = scan_includes(
      request("#if 0\n#include <lib/api.h>\n#endif\n#include HEADER\n#include <none.h>\n", dirs()),
      "k");
  std::vector<std::string> seen;
  for (const auto &header : headers)
    seen.push_back(std::to_string(header.dir) + ":" + header.path +
                   (header.digest ? "" : " absent"));
  EXPECT_EQ(seen, (std::vector<std::string>{"0:lib/api.h", "0:lib/detail/impl.h absent",
                                            "0:none.h absent", "1:lib/detail/impl.h",
                                            "1:none.h absent"}));
}

TEST_F(HeaderLibraryTest, TheScannerRefusesMoreThanItsBounds) {
  for (const ScanLimits limits : {ScanLimits{2, 1 << 20}, ScanLimits{100, 40}}) {
    try {
      scan_includes(request(kSource, dirs()), "k", limits);
      ADD_FAILURE() << "within the bounds";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_parameter);
      EXPECT_NE(error.summary().find("the bound of a header manifest"), std::string::npos)
          << error.summary();
    }
  }
  EXPECT_EQ(scan_includes(request(kSource, dirs()), "k", {3, 1 << 20}).size(), 3u);
}

TEST_F(HeaderLibraryTest, AQuotedIncludeLeavingEveryIncludeDirectoryIsRefused) {
  write_text(dir / "inc0/lib/api.h", "#include \"../../secret.h\"\n");
  write_text(dir / "secret.h", "int secret;\n");
  EXPECT_THROW(scan_includes(request(kSource, {(dir / "inc0").string()}), "k"), Error);
}

} // namespace
} // namespace kjit

// Every way an entry can be damaged where it lies (docs/ARCHITECTURE.md, "The entry format"): each
// is a miss with exactly one warning naming the file, the compile that follows rewrites it, and
// `kjit cache verify` finds it (exit 1) before and passes after. Real NVRTC, in this process.
#include "child.hpp"
#include "kjit/cache/entry.hpp"
#include "kjit/kjit.hpp"
#include "kjit/templates/library.hpp"
#include "tests/support/files.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/temp_dir.hpp"

#include <functional>
#include <gtest/gtest.h>

namespace kjit::testing {
namespace {

namespace fs = std::filesystem;

struct Damage {
  const char *name;
  const char *verify_says; // part of what `kjit cache verify` reports
  // Damages the entry at `path`; `other` is a valid entry file of another variant.
  std::function<void(const fs::path &path, const fs::path &other)> apply;
};

void PrintTo(const Damage &damage, std::ostream *out) { *out << damage.name; }

void rewrite(const fs::path &path, const std::function<void(std::vector<std::byte> &)> &edit) {
  std::vector<std::byte> bytes = read_file_bytes(path);
  edit(bytes);
  write_file_bytes(path, bytes);
}

const Damage damages[] = {
    {"truncation", "truncated",
     [](const fs::path &path, const fs::path &) {
       rewrite(path, [](auto &bytes) { bytes.resize(bytes.size() * 2 / 3); });
     }},
    {"bit flip", "checksum mismatch",
     [](const fs::path &path, const fs::path &) {
       rewrite(path, [](auto &bytes) { bytes[bytes.size() / 2] ^= std::byte{0x04}; });
     }},
    {"another key's entry", "entry holds key",
     [](const fs::path &path, const fs::path &other) {
       fs::copy_file(other, path, fs::copy_options::overwrite_existing);
     }},
    {"wrong target", "entry is for sm_80, expected sm_90",
     [](const fs::path &path, const fs::path &) {
       cache::Entry entry = *cache::decode_entry(read_file_bytes(path)).entry;
       entry.header.target = "sm_80"; // a whole, checksummed entry: only the target is wrong
       write_file_bytes(path, cache::encode_entry(entry));
     }},
    {"future format version", "format version 9, this kjit reads 2",
     [](const fs::path &path, const fs::path &) {
       rewrite(path, [](auto &bytes) { bytes[8] = std::byte{9}; });
     }},
    {"empty file", "truncated: 0 bytes",
     [](const fs::path &path, const fs::path &) { write_file_bytes(path, {}); }},
    {"directory", "not a regular file",
     [](const fs::path &path, const fs::path &other) {
       fs::remove(path);
       fs::create_directory(path);
       fs::copy_file(other, path / "inside.kjit");
     }},
};

class Corruption : public ::testing::TestWithParam<Damage> {
protected:
  void SetUp() override {
    try {
      Runtime(config()).compiler(Vendor::nvidia);
    } catch (const Error &error) {
      GTEST_SKIP() << "NVRTC is not available: " << error.summary();
    }
  }
  Config config() const {
    Config config;
    config.cache_dir = cache;
    config.prebuilt_dir = scratch.path() / "no-prebuilt";
    return config;
  }
  const CodeObject &compile(Runtime &rt, int n) {
    return rt.compile(templates::find("scale"), {{"T", "float"}, {"N", n}}, sm_90);
  }
  ChildOutcome verify() { return run_kjit({"cache", "verify"}, cache, scratch.path()); }

  testing::TempDir scratch;
  fs::path cache = scratch.path() / "cache";
  jit::Target sm_90 = jit::Target::parse("sm_90");
};

TEST_P(Corruption, IsAMissWithOneWarningIsRewrittenAndVerifyFindsIt) {
  fs::path entry, other;
  {
    Runtime rt(config());
    entry = compile(rt, 64).entry_path();
    other = compile(rt, 128).entry_path();
  }
  GetParam().apply(entry, other);

  const ChildOutcome found = verify();
  EXPECT_EQ(found.status >> 8, 1) << found.out << found.err;
  EXPECT_NE(found.out.find(entry.stem().string().substr(0, 12)), std::string::npos) << found.out;
  EXPECT_NE(found.out.find(GetParam().verify_says), std::string::npos) << found.out;

  {
    LogCapture captured;
    Runtime rt(config());
    EXPECT_EQ(compile(rt, 64).origin(), Origin::compiled);
    EXPECT_EQ(captured.warnings(), 1) << captured.text();
    EXPECT_NE(captured.text().find(entry.string()), std::string::npos) << captured.text();
  }
  EXPECT_TRUE(cache::decode_entry(read_file_bytes(entry)).entry.has_value()) << "rewritten";
  Runtime fresh(config());
  EXPECT_EQ(compile(fresh, 64).origin(), Origin::user_cache);
  const ChildOutcome after = verify();
  EXPECT_EQ(after.status, 0) << after.out << after.err;
}

INSTANTIATE_TEST_SUITE_P(EveryDamage, Corruption, ::testing::ValuesIn(damages),
                         [](const auto &info) {
                           std::string name = info.param.name;
                           for (char &c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c)))
                               c = '_';
                           return name;
                         });

} // namespace
} // namespace kjit::testing

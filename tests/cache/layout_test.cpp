#include "tests/support/sample_entries.hpp"
#include "tests/support/temp_dir.hpp"

#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/entry.hpp"
#include "kjit/cache/layout.hpp"
#include "kjit/error.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace kjit::cache {
namespace {

namespace fs = std::filesystem;
using testing::sample_entry;

const Key kKey = sample_entry("layout").header.key;

TEST(Layout, PutsEveryFileUnderTheVersionDirectoryOfTheEntryFormat) {
  const Layout layout("/r");
  EXPECT_EQ(Layout::version_name(), "v" + std::to_string(kEntryFormatVersion));
  EXPECT_EQ(layout.version_directory(), fs::path("/r") / Layout::version_name());
  const fs::path v = layout.version_directory();
  const std::string hex = kKey.hex();
  EXPECT_EQ(layout.entry_path(kKey, "gfx90a:sramecc+:xnack-"),
            v / "gfx90a_sramecc+_xnack-" / hex.substr(0, 2) / (hex + ".kjit"));
  EXPECT_EQ(layout.manifest_path(kKey, "sm_90a"),
            v / "sm_90a" / hex.substr(0, 2) / (hex + ".manifest"));
  EXPECT_EQ(layout.lock_path(), v / "lock");
  EXPECT_EQ(layout.stats_directory(), v / "stats");
  EXPECT_EQ(layout.compilers_directory(), v / "compilers");
  EXPECT_EQ(layout.tuning_directory(), v / "tuning");
  EXPECT_EQ(Layout::tuning_record_name(kKey, "sm_90a"), fs::path("sm_90a") / (hex + ".json"));
}

TEST(Layout, RefusesATargetThatCannotNameADirectory) {
  const Layout layout("/r");
  for (const char *target : {"", "..", "tuning", "lock", "gfx90a/..", "gfx90a:xnack-:sramecc+"}) {
    SCOPED_TRACE(target);
    EXPECT_FALSE(Layout::target_directory(target));
    for (const auto &path : {std::function([&] { layout.entry_path(kKey, target); }),
                             std::function([&] { layout.manifest_path(kKey, target); }),
                             std::function([&] { Layout::tuning_record_name(kKey, target); })}) {
      try {
        path();
        ADD_FAILURE() << "accepted";
      } catch (const Error &error) {
        EXPECT_EQ(error.code(), Errc::bad_target);
        EXPECT_EQ(error.summary(), Layout::invalid_target_problem(target));
      }
    }
  }
}

// The names a listing accepts are exactly those the writers make: an entry DiskStore wrote is an
// entry name in its shard, and a temp file name starts with the temp prefix.
TEST(Layout, KnowsTheNamesItsWritersMake) {
  testing::TempDir dir;
  const DiskStore store(dir.path(), Access::read_write);
  const Entry entry = sample_entry("named");
  store.write(entry);
  const fs::path written = store.layout().entry_path(entry.header.key, entry.header.target);
  ASSERT_TRUE(fs::is_regular_file(written));
  const std::string name = written.filename().string();
  const std::string shard = written.parent_path().filename().string();
  EXPECT_TRUE(Layout::is_shard_name(shard));
  EXPECT_TRUE(Layout::is_entry_name(name, shard));
  EXPECT_EQ(Layout::entry_key_hex(name), entry.header.key.hex());
  EXPECT_FALSE(Layout::is_temp_name(name));

  EXPECT_FALSE(Layout::is_entry_name(name, "zz")) << "another shard's";
  EXPECT_FALSE(Layout::is_entry_name(name.substr(0, 64) + ".json", shard));
  EXPECT_FALSE(Layout::is_entry_name("X" + name.substr(1), shard)) << "not lower-case hex";
  EXPECT_FALSE(Layout::is_entry_name(name + ".kjit", shard));
  EXPECT_FALSE(Layout::is_shard_name("a"));
  EXPECT_FALSE(Layout::is_shard_name("0g"));

  const std::string temp = Layout::temp_prefix(entry.header.key.hex()) + "12.ab.0";
  EXPECT_TRUE(Layout::is_temp_name(temp));
  EXPECT_FALSE(Layout::is_entry_name(temp, shard));
  EXPECT_FALSE(Layout::is_temp_name("tmp.kjit"));
}

} // namespace
} // namespace kjit::cache

// The catalog behind `kjit cache`: what scan() finds, header-only reads, verification of every
// way an entry can be wrong where it lies, least-recently-used pruning and kjit's own recency.
#include "cache/src/summary_file.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"
#include "tests/support/files.hpp"
#include "tests/support/sample_entries.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <fcntl.h>
#include <functional>
#include <gtest/gtest.h>
#include <limits>
#include <span>
#include <sys/stat.h>
#include <thread>

namespace kjit::cache {
namespace {

namespace fs = std::filesystem;
using testing::read_file_bytes;
using testing::sample_entry;
using testing::write_file_bytes;

constexpr std::int64_t second_ns = 1000000000;

std::int64_t mtime_of(const fs::path &path) {
  struct stat status {};
  ::stat(path.c_str(), &status);
  return std::int64_t{status.st_mtim.tv_sec} * second_ns + status.st_mtim.tv_nsec;
}

std::int64_t ctime_of(const fs::path &path) {
  struct stat status {};
  ::stat(path.c_str(), &status);
  return std::int64_t{status.st_ctim.tv_sec} * second_ns + status.st_ctim.tv_nsec;
}

// Makes `change` to the file, again after a pause until its ctime has moved: a file system may keep
// whole seconds, and a change within one tick is what a listing's settling time is for.
void change_visibly(const fs::path &path, const std::function<void()> &change) {
  const std::int64_t before = ctime_of(path);
  for (int attempt = 0; attempt < 300 && ctime_of(path) == before; ++attempt) {
    if (attempt > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    change();
  }
  ASSERT_NE(ctime_of(path), before) << path;
}

void set_mtime(const fs::path &path, std::int64_t unix_seconds) {
  const struct timespec times[2] = {{unix_seconds, 0}, {unix_seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

class CatalogTest : public ::testing::Test {
protected:
  // Writes an entry for `seed` and returns its path.
  fs::path put(const std::string &seed, const std::string &target = testing::kTarget,
               std::size_t code_size = 64) {
    const Entry entry = sample_entry(seed, target, code_size);
    store.write(entry);
    return store.layout().entry_path(entry.header.key, target);
  }
  std::vector<std::string> problems() const {
    std::vector<std::string> found;
    for (const StoredEntry &entry : scan(store))
      if (std::string problem = verify(store, entry); !problem.empty())
        found.push_back(problem);
    return found;
  }

  testing::TempDir dir;
  DiskStore store{dir.path(), Access::read_write};
};

TEST(TargetDirectories, MapBackToTheirTargetIds) {
  for (const char *id : {"gfx90a", "gfx90a:sramecc+:xnack-", "gfx1030", "gfx908:xnack+", "sm_90",
                         "sm_90a", "sm_100f"}) {
    testing::TempDir dir;
    const DiskStore store(dir.path(), Access::read_write);
    const std::string directory = store.layout()
                                      .entry_path(sample_entry("x", id).header.key, id)
                                      .parent_path()
                                      .parent_path()
                                      .filename();
    EXPECT_EQ(Layout::target_of_directory(directory), id) << directory;
  }
}

TEST_F(CatalogTest, ScanFindsEveryEntryWithItsTargetKeyAndSizeAndNothingElse) {
  const fs::path a = put("a", "gfx90a:sramecc+:xnack-", 100);
  const fs::path b = put("b", "sm_90", 3000);
  // Things that live in the tree but are not entries.
  write_file_bytes(a.parent_path() / ".tmp-partial.tmp.1.2.3", read_file_bytes(a));
  write_file_bytes(a.parent_path() / "notes.txt", read_file_bytes(a));
  store.lock(sample_entry("a").header.key); // creates <root>/v2/lock
  std::vector<StoredEntry> found = scan(store);
  std::sort(found.begin(), found.end(),
            [](const StoredEntry &x, const StoredEntry &y) { return x.target < y.target; });
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].path, a.string());
  EXPECT_EQ(found[0].target, "gfx90a:sramecc+:xnack-");
  EXPECT_EQ(found[0].key, sample_entry("a", "gfx90a:sramecc+:xnack-").header.key);
  EXPECT_EQ(found[0].bytes, fs::file_size(a));
  EXPECT_EQ(found[1].path, b.string());
  EXPECT_EQ(found[1].target, "sm_90");
  EXPECT_EQ(found[1].last_use_ns, mtime_of(b));
  EXPECT_TRUE(scan(DiskStore(dir.path() / "absent", Access::read_only)).empty());
}

TEST_F(CatalogTest, ReadHeaderNeedsNeitherTheCodeNorTheChecksum) {
  const fs::path path = put("a", testing::kTarget, 20000);
  std::vector<std::byte> bytes = read_file_bytes(path);
  bytes.resize(bytes.size() - 10000); // the code cut short: not an entry, but its header reads
  write_file_bytes(path, bytes);
  std::string problem;
  const std::optional<EntryHeader> header = read_header(path, problem);
  ASSERT_TRUE(header.has_value()) << problem;
  EXPECT_EQ(*header, sample_entry("a", testing::kTarget, 20000).header);
  EXPECT_NE(verify(store, scan(store).front()).find("truncated"), std::string::npos);

  write_file_bytes(path, std::vector<std::byte>(10, std::byte{'x'}));
  EXPECT_FALSE(read_header(path, problem).has_value());
  EXPECT_EQ(problem, "bad magic");
}

TEST_F(CatalogTest, VerifyPassesGoodEntriesAndNamesWhatIsWrongWithBadOnes) {
  put("good");
  EXPECT_TRUE(problems().empty());

  const fs::path flipped = put("flipped");
  std::vector<std::byte> bytes = read_file_bytes(flipped);
  bytes[bytes.size() / 2] ^= std::byte{0x40};
  write_file_bytes(flipped, bytes);

  // A valid entry copied under another key's name.
  const fs::path moved = put("moved");
  write_file_bytes(moved, read_file_bytes(put("good")));

  // A valid file whose header claims a key its key inputs do not hash to.
  Entry forged = sample_entry("forged");
  forged.header.key_inputs.back().second = "gfx908";
  store.write(forged);

  // An entry for gfx90a placed in the gfx908 directory.
  const Entry other_target = sample_entry("elsewhere", "gfx90a");
  fs::path wrong_place = store.layout().entry_path(other_target.header.key, "gfx908");
  fs::create_directories(wrong_place.parent_path());
  write_file_bytes(wrong_place, encode_entry(other_target));

  std::vector<std::string> found = problems();
  std::sort(found.begin(), found.end());
  ASSERT_EQ(found.size(), 4u) << ::testing::PrintToString(found);
  EXPECT_EQ(found[0], "checksum mismatch");
  EXPECT_NE(found[1].find("entry holds key"), std::string::npos) << found[1];
  EXPECT_NE(found[2].find("entry is for gfx90a, expected gfx908"), std::string::npos) << found[2];
  EXPECT_NE(found[3].find("its key inputs hash to"), std::string::npos) << found[3];
}

TEST_F(CatalogTest, VerifyRefusesAnEntryOthersCanWrite) {
  const fs::path path = put("shared");
  ::chmod(path.c_str(), 0666);
  const std::vector<std::string> found = problems();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0].find("writable by group or others"), std::string::npos) << found[0];
}

TEST_F(CatalogTest, PruneRemovesLeastRecentlyUsedFirstDownToTheSize) {
  std::vector<fs::path> paths;
  for (int i = 0; i < 5; ++i) {
    paths.push_back(put("entry " + std::to_string(i), testing::kTarget, 1000));
    set_mtime(paths.back(), 1700000000 + 100 * i); // entry 0 is the least recently used
  }
  const std::uint64_t each = fs::file_size(paths[0]);
  const PruneResult result = prune(store, 3 * each, std::nullopt);
  EXPECT_EQ(result.removed, 2u);
  EXPECT_EQ(result.removed_bytes, 2 * each);
  EXPECT_EQ(result.kept, 3u);
  EXPECT_EQ(result.kept_bytes, 3 * each);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(fs::exists(paths[i]), i >= 2) << i;
}

TEST_F(CatalogTest, PruneByAgeAndLeavesAWriterInProgressAlone) {
  const fs::path old_entry = put("old");
  const fs::path new_entry = put("new");
  set_mtime(old_entry, 1700000000);
  const fs::path stale_temp = old_entry.parent_path() / ".abc.tmp.1.2.3";
  const fs::path fresh_temp = new_entry.parent_path() / ".def.tmp.4.5.6";
  write_file_bytes(stale_temp, read_file_bytes(old_entry));
  write_file_bytes(fresh_temp, read_file_bytes(new_entry));
  set_mtime(stale_temp, 1700000000);

  const PruneResult result = prune(store, std::nullopt, mtime_of(new_entry) - 3600 * second_ns);
  EXPECT_EQ(result.removed, 1u);
  EXPECT_FALSE(fs::exists(old_entry));
  EXPECT_TRUE(fs::exists(new_entry));
  EXPECT_FALSE(fs::exists(stale_temp)) << "a crashed writer's temp file is cleaned up";
  EXPECT_TRUE(fs::exists(fresh_temp)) << "a writer in progress keeps its temp file";
  EXPECT_THROW(prune(DiskStore(dir.path(), Access::read_only), 0, std::nullopt), Error);
}

TEST(UnixNs, SaturatesInsteadOfWrappingPast2262) {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(unix_ns({1700000000, 5}), 1700000000 * second_ns + 5);
  EXPECT_EQ(unix_ns({10413792000, 0}), max) << "2300-01-01 is later than now, not before 1970";
  EXPECT_EQ(unix_ns({-10413792000, 0}), min);
  EXPECT_EQ(unix_ns({max / second_ns, 999999999}), max);
  EXPECT_EQ(saturating_ns(max), max);
  EXPECT_EQ(saturating_ns(-3), -3 * second_ns);
}

TEST_F(CatalogTest, AnEntryTouchedPast2262IsRecentNotAncient) {
  const fs::path future = put("future");
  set_mtime(future, 10413792000); // 2300-01-01: its mtime in nanoseconds wrapped to 1716
  const std::vector<StoredEntry> found = scan(store);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].last_use_ns, std::numeric_limits<std::int64_t>::max());
  const PruneResult result = prune(store, std::nullopt, unix_now_ns() - 3600 * second_ns);
  EXPECT_EQ(result.removed, 0u);
  EXPECT_TRUE(fs::exists(future));
}

TEST_F(CatalogTest, PruneLeavesAnEntryWhoseWriterHoldsItsKey) {
  const fs::path busy = put("busy"), idle = put("idle");
  const FileLock writer(store.layout().version_directory() / "lock",
                        sample_entry("busy").header.key);
  const PruneResult result = prune(store, 0, std::nullopt);
  EXPECT_EQ(result.removed, 1u);
  EXPECT_EQ(result.kept, 1u);
  EXPECT_TRUE(fs::exists(busy)) << "its writer may be publishing it";
  EXPECT_FALSE(fs::exists(idle));
}

// ---- header manifests beside the entries
// ---------------------------------------------------------

class ManifestCatalogTest : public CatalogTest {
protected:
  static Key base_key(const std::string &seed) { return KeyBuilder().add("base", seed).finish(); }
  // Writes the manifest of base key `base_seed` whose results name the entries of `seeds` (written
  // or not), and returns its path.
  fs::path put_manifest(const std::string &base_seed, const std::vector<std::string> &seeds) {
    HeaderManifest manifest{base_key(base_seed), 1, {}};
    for (const std::string &seed : seeds)
      manifest.results.push_back(
          {sample_entry(seed).header.key, {{0, "lib/a.h", std::string(64, 'a'), {}}}});
    store.write_manifest(manifest, testing::kTarget);
    return manifest_path(base_seed);
  }
  fs::path manifest_path(const std::string &base_seed) const {
    return store.layout().manifest_path(base_key(base_seed), testing::kTarget);
  }
};

TEST_F(ManifestCatalogTest, ClearRemovesManifestsWithTheEntries) {
  put("a");
  put("b");
  const fs::path manifest = put_manifest("base", {"a", "b"});
  const std::uint64_t manifest_bytes = fs::file_size(manifest);
  const PruneResult result = prune(store, 0, std::nullopt);
  EXPECT_EQ(result.removed, 2u);
  EXPECT_EQ(result.manifests_removed, 1u);
  EXPECT_EQ(result.kept_bytes, 0u);
  EXPECT_GT(result.removed_bytes, manifest_bytes);
  EXPECT_FALSE(fs::exists(manifest));
  EXPECT_TRUE(scan_manifests(store).empty());
}

TEST_F(ManifestCatalogTest, PruneRemovesAManifestOnceItsLastEntryIsGoneAndCountsItsBytes) {
  const fs::path a = put("a", testing::kTarget, 1000), b = put("b", testing::kTarget, 1000);
  set_mtime(a, 1700000000); // a is the least recently used
  set_mtime(b, 1700000100);
  const fs::path of_a = put_manifest("of a", {"a"});
  const fs::path of_both = put_manifest("of both", {"a", "b"});
  const fs::path orphan = put_manifest("orphan", {"gone"});
  const std::uint64_t entry = fs::file_size(a);
  const std::uint64_t kept = entry + fs::file_size(of_both);
  // Room for one entry and its manifest: a goes, and with it the manifest naming only a; the one
  // naming b too stays, and the one naming no entry goes whatever the room.
  const PruneResult result = prune(store, kept, std::nullopt);
  EXPECT_EQ(result.removed, 1u);
  EXPECT_EQ(result.manifests_removed, 2u);
  EXPECT_EQ(result.kept_bytes, kept);
  EXPECT_FALSE(fs::exists(a));
  EXPECT_TRUE(fs::exists(b));
  EXPECT_FALSE(fs::exists(of_a));
  EXPECT_TRUE(fs::exists(of_both));
  EXPECT_FALSE(fs::exists(orphan));
  // The manifests' bytes count: a budget of the entry alone removes it, then its manifest.
  const PruneResult tighter = prune(store, entry, std::nullopt);
  EXPECT_EQ(tighter.removed, 1u);
  EXPECT_EQ(tighter.manifests_removed, 1u);
}

TEST_F(ManifestCatalogTest, PruneLeavesAManifestWhoseEntryOrWriterIsBusy) {
  put("busy");
  const fs::path manifest = put_manifest("base", {"busy"});
  {
    const FileLock writer(store.layout().lock_path(), sample_entry("busy").header.key);
    EXPECT_EQ(prune(store, 0, std::nullopt).manifests_removed, 0u);
    EXPECT_TRUE(fs::exists(manifest)) << "its entry stays, so it does";
  }
  const FileLock writer(store.layout().lock_path(), base_key("base"));
  EXPECT_EQ(prune(store, 0, std::nullopt).manifests_removed, 0u);
  EXPECT_TRUE(fs::exists(manifest)) << "its writer may be adding a result";
}

TEST_F(ManifestCatalogTest, VerifyChecksManifestsAndNamesWhatIsWrong) {
  const fs::path good = put_manifest("good", {"a"});
  const fs::path damaged = put_manifest("damaged", {"a"});
  std::vector<std::byte> bytes = read_file_bytes(damaged);
  bytes[bytes.size() / 2] ^= std::byte{0x20};
  write_file_bytes(damaged, bytes);
  const std::vector<StoredEntry> manifests = scan_manifests(store);
  ASSERT_EQ(manifests.size(), 2u);
  for (const StoredEntry &manifest : manifests) {
    const std::string problem = verify_manifest(store, manifest);
    if (manifest.path == good.string())
      EXPECT_EQ(problem, "");
    else
      EXPECT_EQ(problem, "its checksum does not match its content");
  }
  EXPECT_TRUE(scan(store).empty()) << "a manifest is no entry";
  const auto bad = std::ranges::find(manifests, damaged.string(), &StoredEntry::path);
  EXPECT_EQ(remove_manifest(store, *bad), "");
  EXPECT_FALSE(fs::exists(damaged));
  EXPECT_NE(remove_manifest(DiskStore(dir.path(), Access::read_only), manifests[0]), "");
}

// What `kjit cache ls` shows: each entry with its header's summary, the same whether it came from
// the directory's summaries file or from the header.
class ListTest : public CatalogTest {
protected:
  static constexpr std::int64_t later_ns = 3600 * second_ns; // every file settled by then
  std::vector<ListedEntry> listed(const DiskStore &from, std::int64_t now_ns = unix_now_ns()) {
    std::vector<ListedEntry> found = list(from, {}, now_ns + later_ns);
    std::sort(found.begin(), found.end(), [](const ListedEntry &a, const ListedEntry &b) {
      return a.stored.path < b.stored.path;
    });
    return found;
  }
  static fs::path summaries_of(const fs::path &entry) {
    return entry.parent_path() / kSummaryFileName;
  }
  static std::vector<SummaryRow> rows_in(const fs::path &summaries) {
    return decode_summaries(read_file_bytes(summaries)).value_or(std::vector<SummaryRow>{});
  }
};

TEST_F(ListTest, SummarisesEveryHeaderAndKeepsTheSummariesBesideTheEntries) {
  const fs::path a = put("a", "gfx90a");
  put("b", "sm_90");
  const std::vector<ListedEntry> found = listed(store);
  ASSERT_EQ(found.size(), 2u);
  for (const ListedEntry &entry : found) {
    ASSERT_TRUE(entry.summary.has_value()) << entry.problem;
    EXPECT_EQ(entry.summary->template_name, "scale");
    EXPECT_EQ(entry.summary->kernels, sample_entry("a").header.kernels);
  }
  EXPECT_EQ(found[0].stored.path, a.string());
  const std::vector<SummaryRow> rows = rows_in(summaries_of(a));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].key, found[0].stored.key);
  EXPECT_EQ(rows[0].version.bytes, fs::file_size(a));

  const std::vector<ListedEntry> gfx = list(store, "gfx90a");
  ASSERT_EQ(gfx.size(), 1u);
  EXPECT_EQ(gfx[0].stored.target, "gfx90a");

  prune(store, 0, std::nullopt);
  EXPECT_TRUE(listed(store).empty());
  EXPECT_FALSE(fs::exists(summaries_of(a))) << "nothing left to summarise";
}

TEST_F(ListTest, ParametersAreTheHeadersTypedParameters) {
  Entry entry = sample_entry("p");
  entry.header.parameters = {{"T", "half"}, {"N", 8}};
  store.write(entry);
  const std::vector<ListedEntry> found = listed(store);
  ASSERT_EQ(found.size(), 1u);
  ASSERT_TRUE(found[0].summary) << found[0].problem;
  EXPECT_EQ(found[0].summary->parameters, (std::vector<EntryParameter>{{"T", "half"}, {"N", 8}}));
}

// The summaries file keeps each parameter's kind: "8" the type and 8 the integer stay apart.
TEST(SummaryFile, RoundTripsTypedParameters) {
  SummaryRow row;
  row.key = sample_entry("s").header.key;
  row.version = {.inode = 7, .bytes = 100, .change_ns = -1};
  row.summary = {.template_name = "scale",
                 .parameters = {{"T", "8"}, {"N", 8}, {"M", std::int64_t{-1} << 40}, {"", ""}},
                 .kernels = {{"scale<float, 8>", "_Z5scaleIfLi8EEvPT_"}}};
  const std::vector<SummaryRow> rows = {row, row};
  const std::optional<std::vector<SummaryRow>> decoded = decode_summaries(encode_summaries(rows));
  ASSERT_TRUE(decoded);
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[1].summary, row.summary);
  std::vector<std::byte> bytes = encode_summaries(rows);
  bytes.resize(bytes.size() - 1);
  EXPECT_FALSE(decode_summaries(bytes)) << "a cut-off file is refused";
}

TEST_F(ListTest, ASummaryIsUsedOnlyWhileItsEntryFileIsUnchanged) {
  const fs::path path = put("a");
  const Entry written = sample_entry("a");
  listed(store);
  // Plant a summary that differs from the header but names the file's current version: it is
  // shown, which proves the header was not read.
  std::vector<SummaryRow> rows = rows_in(summaries_of(path));
  ASSERT_EQ(rows.size(), 1u);
  rows[0].summary.template_name = "from the summaries file";
  write_file_bytes(summaries_of(path), encode_summaries(rows));
  EXPECT_EQ(listed(store)[0].summary->template_name, "from the summaries file");

  // Any change to the file, even one that keeps its size and bytes, is a new version: the header
  // is read again and the file rewritten.
  change_visibly(path, [&] { ::chmod(path.c_str(), 0600); });
  std::vector<ListedEntry> found = listed(store);
  EXPECT_EQ(found[0].summary->template_name, "scale");
  EXPECT_EQ(rows_in(summaries_of(path))[0].summary.template_name, "scale");

  // Replaced by another file: a different header in the same place.
  Entry renamed = written;
  renamed.header.template_name = "scale2";
  write_file_bytes(path, encode_entry(renamed));
  EXPECT_EQ(listed(store)[0].summary->template_name, "scale2");

  // Damaged in place: the listing says what the header says now.
  const std::vector<std::byte> damaged(fs::file_size(path), std::byte{'x'});
  change_visibly(path, [&] { write_file_bytes(path, damaged); });
  found = listed(store);
  EXPECT_FALSE(found[0].summary.has_value());
  EXPECT_EQ(found[0].problem, "bad magic");
  EXPECT_TRUE(rows_in(summaries_of(path)).empty()) << "an unreadable header is not summarised";
}

TEST_F(ListTest, ADamagedSummariesFileIsIgnoredAndRewritten) {
  const fs::path path = put("a");
  listed(store);
  std::vector<std::byte> bytes = read_file_bytes(summaries_of(path));
  bytes[20] ^= std::byte{1};
  write_file_bytes(summaries_of(path), bytes);
  EXPECT_FALSE(decode_summaries(bytes).has_value());
  EXPECT_EQ(listed(store)[0].summary->template_name, "scale");
  EXPECT_EQ(rows_in(summaries_of(path)).size(), 1u);
  bytes = read_file_bytes(summaries_of(path));
  for (std::size_t size = 0; size < bytes.size(); ++size)
    EXPECT_FALSE(decode_summaries(std::span(bytes).first(size)).has_value()) << size;
}

TEST_F(ListTest, AFileJustChangedIsNotSummarisedAndAReadOnlyTierWritesNothing) {
  const fs::path path = put("a");
  // Now, not an hour later: the entry changed too recently for a summary of it to be trusted.
  const std::vector<ListedEntry> found = list(store);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].summary->template_name, "scale");
  EXPECT_FALSE(fs::exists(summaries_of(path)));

  const DiskStore read_only(dir.path(), Access::read_only);
  EXPECT_EQ(listed(read_only)[0].summary->template_name, "scale");
  EXPECT_FALSE(fs::exists(summaries_of(path)));
  EXPECT_EQ(scan(store).size(), 1u) << "the summaries file is not an entry";
}

TEST_F(CatalogTest, AHitIsRecordedAsAUseAtMostOnceAMinute) {
  const Entry entry = sample_entry("used");
  const fs::path path = put("used");
  set_mtime(path, 1700000000);
  Lookup hit = store.read(entry.header.key, entry.header.target);
  ASSERT_EQ(hit.status, Lookup::Status::hit);
  EXPECT_EQ(hit.last_use_ns, 1700000000 * second_ns);
  store.record_use(hit);
  const std::int64_t used = mtime_of(path);
  EXPECT_GT(used, 1700000000 * second_ns + 86400 * second_ns) << "set to now";

  set_mtime(path, used / second_ns - 10); // used ten seconds ago: not written again
  Lookup recent = store.read(entry.header.key, entry.header.target);
  store.record_use(recent);
  EXPECT_EQ(mtime_of(path), (used / second_ns - 10) * second_ns);

  set_mtime(path, 1700000000);
  DiskStore(dir.path(), Access::read_only).record_use(hit);
  EXPECT_EQ(mtime_of(path), 1700000000 * second_ns) << "a read-only tier records nothing";
}

} // namespace
} // namespace kjit::cache

// The tuning table (keying, round trip, export and import, concurrency, records for another
// device, corrupt records) and the tuner's logic against a fake measurement: the device side is
// checked on a GPU.
#include "kjit/cache/archive.hpp"
#include "kjit/error.hpp"
#include "kjit/runtime/tuner.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/library.hpp"
#include "tests/runtime/tuning_records.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/temp_dir.hpp"

#include <atomic>
#include <fstream>
#include <gtest/gtest.h>
#include <thread>

namespace kjit {
namespace {

using testing::h100;
using testing::LogCapture;
using testing::record_for;
using testing::rms_key;
using testing::TempDir;

TEST(TuningKey, NamesTemplateProblemDeviceAndCompiler) {
  const cache::Key base = rms_key(4096).key();
  EXPECT_EQ(base, rms_key(4096).key());
  EXPECT_NE(base, rms_key(2048).key());
  EXPECT_NE(base, rms_key(4096, {"sm_90a", 114, "NVIDIA H100 PCIe"}).key()); // another SM count
  EXPECT_NE(base, rms_key(4096, {"sm_80", 132, ""}).key());
  EXPECT_NE(base, rms_key(4096, h100, "nvrtc 12.4").key());
  // The device's name is for people: the same target and SM count are the same device model.
  EXPECT_EQ(base, rms_key(4096, {"sm_90a", 132, "renamed"}).key());
  // Parameter order does not matter.
  EXPECT_EQ(base, TuningKey::of(templates::find("rms_norm"), {{"HIDDEN", 4096}, {"T", "bfloat16"}},
                                {{"rows", 4096}}, h100, "nvrtc 13.0")
                      .key());
  EXPECT_NE(base, TuningKey::of(templates::find("rms_norm"), {{"HIDDEN", 4096}, {"T", "bfloat16"}},
                                {{"rows", 64}}, h100, "nvrtc 13.0")
                      .key());
  EXPECT_NE(base, TuningKey::of(templates::find("softmax"), {{"T", "bfloat16"}, {"COLS", 4096}},
                                {{"rows", 4096}}, h100, "nvrtc 13.0")
                      .key());
}

TEST(TuningKey, RefusesTunableAndUnknownProblemParameters) {
  const Template &rms = templates::find("rms_norm");
  try {
    TuningKey::of(rms, {{"T", "half"}, {"HIDDEN", 64}, {"VEC", 4}}, {}, h100, "c");
    FAIL() << "VEC is tunable";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_parameter);
    EXPECT_NE(error.summary().find("'VEC' is a tunable parameter"), std::string::npos);
  }
  EXPECT_THROW(TuningKey::of(rms, {{"T", "half"}, {"ROWS", 64}}, {}, h100, "c"), Error);
}

TEST(TuningKey, ChangesWithTheTemplateSource) {
  const Template a(
      "k", "template <int N, int V> __global__ void k() {}",
      {{"N", ParamSchema::integer(1, 8)}, {"V", ParamSchema::one_of({1, 2}).tunable()}});
  const Template b(
      "k", "template <int N, int V> __global__ void k() { }",
      {{"N", ParamSchema::integer(1, 8)}, {"V", ParamSchema::one_of({1, 2}).tunable()}});
  EXPECT_NE(TuningKey::of(a, {{"N", 2}}, {}, h100, "c").key(),
            TuningKey::of(b, {{"N", 2}}, {}, h100, "c").key());
}

TEST(TuningTable, RoundTripsARecordThroughTheUserTier) {
  TempDir dir;
  const TuningTable table(dir.path());
  EXPECT_FALSE(table.find(rms_key(4096)));
  const TuningRecord record = record_for(rms_key(4096));
  table.store(record);
  const std::optional<TuningRecord> found = TuningTable(dir.path()).find(rms_key(4096));
  ASSERT_TRUE(found);
  EXPECT_EQ(*found, record);
  EXPECT_FALSE(table.find(rms_key(2048)));
  ASSERT_EQ(table.list().size(), 1u);
  // Values in declaration order (as the tuner gives them) come back by name, and still match.
  TuningRecord declared = record_for(rms_key(1024));
  declared.winner.params = {{"VEC", 8}, {"THREADS", 256}};
  table.store(declared);
  EXPECT_EQ(*table.find(rms_key(1024)), declared);
  EXPECT_EQ(table.list().back(), record); // listed by problem: 1024 first
}

TEST(TuningTable, ReadsThePrebuiltTierFirst) {
  TempDir user, shipped;
  TuningRecord prebuilt = record_for(rms_key(4096));
  prebuilt.winner.time_us = 1.0;
  TuningTable(shipped.path()).store(prebuilt);
  const TuningTable table(user.path(), shipped.path());
  table.store(record_for(rms_key(4096)));
  ASSERT_TRUE(table.find(rms_key(4096)));
  EXPECT_EQ(table.find(rms_key(4096))->winner.time_us, 1.0);
  EXPECT_EQ(table.list().size(), 2u);
}

TEST(TuningTable, NeverUsesARecordForAnotherDeviceOrCompiler) {
  TempDir dir;
  const TuningTable table(dir.path());
  table.store(record_for(rms_key(4096, {"sm_90a", 114, "NVIDIA H100 PCIe"})));
  table.store(record_for(rms_key(4096, h100, "nvrtc 12.4")));
  EXPECT_FALSE(table.find(rms_key(4096)));

  // A record planted under this device's key whose content names another device: skipped, once.
  const TuningRecord other = record_for(rms_key(4096, {"sm_90a", 114, "NVIDIA H100 PCIe"}));
  std::filesystem::path ours;
  for (const auto &item : std::filesystem::recursive_directory_iterator(dir.path()))
    if (item.path().extension() == ".json")
      ours = item.path().parent_path() / (rms_key(4096).key().hex() + ".json");
  { std::ofstream(ours) << other.to_json(); }
  LogCapture captured;
  EXPECT_FALSE(table.find(rms_key(4096)));
  EXPECT_FALSE(table.find(rms_key(4096)));
  EXPECT_EQ(captured.warnings(), 1) << captured.text();
  EXPECT_NE(captured.text().find("not the problem and device asked for"), std::string::npos);
}

TEST(TuningTable, SkipsACorruptRecordWithOneWarning) {
  TempDir dir;
  const TuningTable table(dir.path());
  table.store(record_for(rms_key(1024)));
  table.store(record_for(rms_key(4096)));
  std::filesystem::path damaged;
  for (const auto &item : std::filesystem::recursive_directory_iterator(dir.path()))
    if (item.path().filename() == rms_key(4096).key().hex() + ".json")
      damaged = item.path();
  ASSERT_FALSE(damaged.empty());
  std::string text = record_for(rms_key(4096)).to_json();
  { std::ofstream(damaged) << text.substr(0, text.size() / 2); }
  LogCapture captured;
  EXPECT_FALSE(table.find(rms_key(4096)));
  EXPECT_EQ(table.list().size(), 1u); // the other record is still listed
  EXPECT_FALSE(table.find(rms_key(4096)));
  EXPECT_EQ(captured.warnings(), 1) << captured.text();

  // A record whose winner was edited no longer matches its key field: refused.
  std::string edited = text;
  edited.replace(edited.find("\"compute_units\": 132"), 20, "\"compute_units\": 133");
  { std::ofstream(damaged) << edited; }
  EXPECT_FALSE(TuningTable(dir.path()).find(rms_key(4096)));
}

TEST(TuningTable, ExportsAndImportsRecordsAsJsonAndShowsThemAsCsv) {
  TempDir from, to;
  const TuningTable source(from.path());
  source.store(record_for(rms_key(1024)));
  source.store(record_for(rms_key(4096)));
  const std::string exported = tuning_records_json(source.list());
  const std::vector<TuningRecord> parsed = parse_tuning_records(exported, "exported.json");
  ASSERT_EQ(parsed.size(), 2u);
  const TuningTable destination(to.path());
  EXPECT_EQ(destination.import_records(parsed), 2u);
  EXPECT_EQ(destination.list(), source.list());

  const std::string csv = tuning_csv(source.list());
  EXPECT_NE(csv.find("\"rms_norm\",\"HIDDEN=1024,T=bfloat16\",\"rows=4096\",\"sm_90a\",132,"),
            std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3); // a header and one row per record

  std::string altered = exported;
  altered.replace(altered.find("\"compiler\": \"nvrtc 13.0\""), 24, "\"compiler\": \"nvrtc 99.0\"");
  try {
    parse_tuning_records(altered, "altered.json");
    FAIL() << "a record whose key does not match its content was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_archive);
    EXPECT_NE(error.summary().find("altered.json: record 1"), std::string::npos);
  }
  EXPECT_THROW(parse_tuning_records("[1, 2]", "list.json"), Error);
}

// A record is untrusted input: its winner must be a set of tunable values its template takes.
TEST(TuningTable, AWinnerIsCheckedAgainstItsTemplatesSchema) {
  const Template &rms_norm = templates::find("rms_norm");
  TuningRecord record = record_for(rms_key(4096));
  EXPECT_EQ(winner_problem(rms_norm, record), "");
  record.winner.params = {{"THREADS", 256}, {"VEC", 3}};
  EXPECT_NE(winner_problem(rms_norm, record).find("VEC = 3 is not allowed"), std::string::npos)
      << winner_problem(rms_norm, record);
  record.winner.params = {{"THREADS", 256}, {"VEC", 8}, {"HIDDEN", 1024}};
  EXPECT_NE(winner_problem(rms_norm, record).find("'HIDDEN', which is a problem parameter"),
            std::string::npos)
      << winner_problem(rms_norm, record);
  record.winner.params = {{"WARPS", 2}};
  EXPECT_NE(winner_problem(rms_norm, record).find("'WARPS', which is not a parameter of rms_norm"),
            std::string::npos)
      << winner_problem(rms_norm, record);
}

// Import checks winners where it can: a record of the built-in template's source whose winner the
// template refuses is refused; one of another version of the template cannot be checked and is
// kept, never found for this one.
TEST(TuningTable, ImportRefusesAWinnerItsTemplateDoesNotTake) {
  const TuningRecord good = record_for(rms_key(1024));
  TuningRecord odd = record_for(rms_key(4096));
  odd.winner.params = {{"THREADS", 256}, {"VEC", 3}};
  try {
    parse_tuning_records(tuning_records_json({good, odd}), "odd.json");
    FAIL() << "a winner with VEC=3 was accepted";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_archive);
    EXPECT_NE(error.summary().find("odd.json: record 2: its winner THREADS=256,VEC=3 does not fit "
                                   "rms_norm"),
              std::string::npos)
        << error.summary();
  }
  TuningRecord other_version = odd;
  other_version.key.source_digest = std::string(64, '0');
  EXPECT_EQ(parse_tuning_records(tuning_records_json({other_version}), "old.json").size(), 1u);
}

// Every file under `root`: what "nothing written" means.
std::vector<std::filesystem::path> files_under(const std::filesystem::path &root) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::exists(root))
    for (const auto &item : std::filesystem::recursive_directory_iterator(root))
      if (item.is_regular_file())
        files.push_back(item.path());
  return files;
}

TEST(TuningArchive, CarriesTheRecordsFromOneCacheToAnEmptyOne) {
  TempDir from, to;
  const TuningTable source(from.path());
  const TuningDevice pcie{"sm_90a", 114, "NVIDIA H100 PCIe"};
  source.store(record_for(rms_key(1024)));
  source.store(record_for(rms_key(4096)));
  source.store(record_for(rms_key(4096, pcie)));
  const std::filesystem::path archive = from.path() / "warm.kjitar";
  const cache::DiskStore exporting(from.path(), cache::Access::read_write);
  EXPECT_EQ(export_cache_archive(exporting, archive).records, 3u);

  const cache::DiskStore importing(to.path(), cache::Access::read_write);
  EXPECT_EQ(import_cache_archive(importing, archive).records, 3u);
  const TuningTable destination(to.path());
  EXPECT_EQ(destination.find(rms_key(4096)), record_for(rms_key(4096)));
  EXPECT_EQ(destination.find(rms_key(1024)), record_for(rms_key(1024)));
  // The other device's record is kept under its own key: found for that device only.
  EXPECT_EQ(destination.find(rms_key(4096, pcie)), record_for(rms_key(4096, pcie)));
  EXPECT_NE(destination.find(rms_key(4096))->key.device, pcie);
  EXPECT_EQ(destination.list(), source.list());
  // Importing again changes nothing.
  EXPECT_EQ(import_cache_archive(importing, archive).records, 3u);
  EXPECT_EQ(destination.list(), source.list());
}

TEST(TuningArchive, RefusesATamperedRecordWithNothingWritten) {
  TempDir from, to;
  const cache::DiskStore exporting(from.path(), cache::Access::read_write);
  const cache::DiskStore importing(to.path(), cache::Access::read_write);
  const std::string good = record_for(rms_key(1024)).to_json();
  std::string other_compiler = record_for(rms_key(4096)).to_json();
  other_compiler.replace(other_compiler.find("\"compiler\": \"nvrtc 13.0\""), 24,
                         "\"compiler\": \"nvrtc 99.0\"");
  // Consistent with its key, but its target cannot name a directory.
  const std::string escaping = record_for(rms_key(4096, {"../../x", 132, ""})).to_json();
  // Consistent with its key, but rms_norm takes no VEC=3.
  TuningRecord odd = record_for(rms_key(4096));
  odd.winner.params = {{"THREADS", 256}, {"VEC", 3}};
  const std::filesystem::path archive = from.path() / "tampered.kjitar";
  for (const std::string &bad :
       {other_compiler, good.substr(0, good.size() / 2), escaping, odd.to_json()}) {
    // export_archive frames the records it is given with a valid checksum: only the record is bad.
    cache::export_archive(exporting, archive, {good, bad});
    try {
      import_cache_archive(importing, archive);
      ADD_FAILURE() << "imported a tampered record:\n" << bad;
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_archive) << error.summary();
      EXPECT_NE(error.summary().find("tampered.kjitar: record 2: "), std::string::npos)
          << error.summary();
    }
    EXPECT_EQ(files_under(to.path()), std::vector<std::filesystem::path>{}) << bad;
  }
}

TEST(TuningTable, ConcurrentTunersOfOneProblemTuneItOnce) {
  TempDir dir;
  std::atomic<int> tunings = 0;
  std::vector<std::thread> threads;
  std::vector<TuningRecord> results(6);
  for (std::size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] {
      // A table per thread, as separate processes would have: the lock is the file's.
      results[i] = TuningTable(dir.path()).find_or_tune(rms_key(4096), [&] {
        ++tunings;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        TuningRecord record = record_for(rms_key(4096));
        record.created_unix = 1764000000 + static_cast<std::int64_t>(i);
        return record;
      });
    });
  for (auto &thread : threads)
    thread.join();
  EXPECT_EQ(tunings, 1);
  for (const TuningRecord &result : results)
    EXPECT_EQ(result, results.front());
}

// As for a compile: a user tier that cannot be written costs one warning, not the tuning.
TEST(TuningTable, ATuningWhoseRecordCannotBeKeptIsStillReturned) {
  TempDir dir;
  const TuningTable table(dir.path());
  const std::filesystem::path tuning = table.user_directory();
  std::filesystem::create_directories(tuning.parent_path());
  std::ofstream(tuning) << "a file where the tuning directory goes";
  LogCapture captured;
  int tunings = 0;
  const TuningRecord record = table.find_or_tune(rms_key(4096), [&] {
    ++tunings;
    return record_for(rms_key(4096));
  });
  EXPECT_EQ(record, record_for(rms_key(4096)));
  EXPECT_EQ(tunings, 1);
  EXPECT_EQ(captured.warnings(), 1) << captured.text();
  EXPECT_NE(captured.text().find("tuning records made by this process are kept in memory only"),
            std::string::npos)
      << captured.text();
}

TEST(TuningTable, WithoutAUserTierNothingIsStored) {
  const TuningTable table{std::filesystem::path()};
  EXPECT_FALSE(table.find(rms_key(4096)));
  EXPECT_THROW(table.store(record_for(rms_key(4096))), Error);
}

// ---- the tuner against a fake measurement ---------------------------------------------------

const Template toy("toy", "template <int N, int V, int W> __global__ void toy() {}",
                   {{"N", ParamSchema::integer(1, 1 << 20)},
                    {"V", ParamSchema::one_of({1, 2, 4}).tunable()},
                    {"W", ParamSchema::one_of({32, 64}).tunable()}},
                   {.tuning = {.fits = [](const Instance &instance, std::string_view) {
                      return instance.values().get("V").integer() == 4 ? "V 4 does not fit"
                                                                       : std::string();
                    }}});

TEST(Tuner, TriesEveryAllowedTunableValueTheRulesAccept) {
  const Candidates candidates = tuning_candidates({&toy, {{"N", 1024}}}, {}, "sm_90a");
  EXPECT_EQ(candidates.accepted.size(), 4u); // V in {1, 2} x W in {32, 64}
  EXPECT_EQ(candidates.refused.size(), 2u);
  EXPECT_EQ(candidates.refused.front().second, "V 4 does not fit");
  const Candidates narrowed =
      tuning_candidates({&toy, {{"N", 1024}}}, {{"W", {Value(64)}}}, "sm_90a");
  ASSERT_EQ(narrowed.accepted.size(), 2u);
  EXPECT_EQ(narrowed.accepted[1].get("W").integer(), 64);
}

TEST(Tuner, RefusesABadSearchSpace) {
  auto code_and_text = [](const SearchSpace &space, ParamValues problem = {{"N", 1024}}) {
    try {
      tuning_candidates({&toy, problem}, space, "sm_90a");
    } catch (const Error &error) {
      return std::pair{error.code(), error.summary()};
    }
    return std::pair{Errc::bad_argument, std::string("accepted")};
  };
  auto [code, text] = code_and_text({{"X", {Value(1)}}});
  EXPECT_EQ(code, Errc::bad_parameter);
  EXPECT_NE(text.find("unknown parameter 'X'"), std::string::npos) << text;
  std::tie(code, text) = code_and_text({{"V", {Value(3)}}});
  EXPECT_EQ(code, Errc::bad_parameter);
  EXPECT_NE(text.find("V = 3 is not allowed"), std::string::npos) << text;
  std::tie(code, text) = code_and_text({{"N", {Value(3)}}});
  EXPECT_NE(text.find("'N' is a problem parameter"), std::string::npos) << text;
  std::tie(code, text) = code_and_text({{"V", {Value(4)}}});
  EXPECT_NE(text.find("no candidate fits"), std::string::npos) << text;
  std::tie(code, text) = code_and_text({}, {{"N", 1024}, {"V", 1}});
  EXPECT_NE(text.find("'V' is tunable"), std::string::npos) << text;
}

TEST(Tuner, DropsCandidatesThatFailOrDisagreeAndPicksTheFastest) {
  const std::vector<double> right = {1.0, -2.0, 3.0, 0.5};
  std::size_t done = 0;
  TuneOptions options;
  options.progress = [&](std::size_t finished, std::size_t total) {
    done = finished;
    EXPECT_EQ(total, 4u);
  };
  const TuneResult result =
      tune({&toy, {{"N", 1024}}}, options, "sm_90a", [&](const ParamValues &p) {
        const std::int64_t v = p.get("V").integer(), w = p.get("W").integer();
        if (v == 1 && w == 64)
          throw Error(Errc::compile_error, "toy<1024, 1, 64>: does not compile");
        if (v == 2 && w == 64)
          return Measurement{0.5, {9.0, 9.0, 9.0, 9.0}}; // the fastest, but wrong: garbage
        return Measurement{v == 2 ? 2.0 : 3.0, right};
      });
  EXPECT_EQ(done, 4u);
  EXPECT_EQ(result.tried, 4u);
  EXPECT_EQ(result.winner.params.get("V").integer(), 2);
  EXPECT_EQ(result.winner.params.get("W").integer(), 32);
  EXPECT_EQ(result.winner.time_us, 2.0);
  ASSERT_EQ(result.runners_up.size(), 1u);
  EXPECT_EQ(result.runners_up[0].time_us, 3.0);
  ASSERT_EQ(result.dropped.size(), 4u); // two refused by the rules, two here
  int failed = 0, disagreed = 0;
  for (const auto &[params, why] : result.dropped) {
    failed += why.find("does not compile") != std::string::npos;
    disagreed += why.find("differs from the reference") != std::string::npos;
  }
  EXPECT_EQ(failed, 1);
  EXPECT_EQ(disagreed, 1);
}

TEST(Tuner, ABudgetTooSmallForOneCandidateIsAnError) {
  TuneOptions options;
  options.budget_s = 0;
  EXPECT_THROW(tune({&toy, {{"N", 1}}}, options, "sm_90a",
                    [](const ParamValues &) {
                      return Measurement{1, {1}};
                    }),
               Error);
  options.budget_s = 0.01;
  try {
    tune({&toy, {{"N", 1}}}, options, "sm_90a", [](const ParamValues &) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return Measurement{1, {1}};
    });
    FAIL() << "the first candidate overran the budget";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_parameter);
    EXPECT_NE(error.summary().find("too small for one candidate"), std::string::npos);
  }
}

TEST(Tuner, StopsWhenTheBudgetIsSpent) {
  TuneOptions options;
  options.budget_s = 0.05;
  int calls = 0;
  const TuneResult result = tune({&toy, {{"N", 1}}}, options, "sm_90a", [&](const ParamValues &) {
    std::this_thread::sleep_for(std::chrono::milliseconds(++calls == 1 ? 1 : 40));
    return Measurement{1, {1}};
  });
  EXPECT_LT(result.tried, 4u);
  EXPECT_EQ(result.tried + result.untried, 4u);
}

TEST(Tuner, NoCandidateThatRunsIsAnError) {
  try {
    tune({&toy, {{"N", 1}}}, {}, "sm_90a", [](const ParamValues &) -> Measurement {
      throw Error(Errc::device_error, "launch failed");
    });
    FAIL();
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::device_error);
    EXPECT_NE(error.detail().find("launch failed"), std::string::npos);
  }
}

TEST(Tuner, RelativeDifferenceTreatsNaNAsDisagreement) {
  EXPECT_EQ(relative_difference({1, 2}, {1, 2}), 0);
  EXPECT_NEAR(relative_difference({1.01, 0}, {1, 0}), 0.01, 1e-12);
  EXPECT_TRUE(std::isinf(relative_difference({NAN, 2}, {1, 2})));
  EXPECT_TRUE(std::isinf(relative_difference({1}, {1, 2})));
}

// gemm_wgmma's search space holds its cluster shapes (1 x 1, 2 x 1, 1 x 2) and both epilogues,
// with every value of its other tunables but SPLIT_K, SWAP_AB, BLOCK_M and the narrow BLOCK_Ns
// (whose own rules gemm_test checks); the rules drop 2 x 2 before anything is compiled.
TEST(BuiltinRules, GemmWgmmaSearchesClustersOfOneOrTwoBlocksAndBothEpilogues) {
  const Template &wgmma = templates::find("gemm_wgmma");
  const Candidates candidates = tuning_candidates({&wgmma, {{"T", "bfloat16"}}},
                                                  {{"CLUSTER_M", {1, 2}},
                                                   {"CLUSTER_N", {1, 2}},
                                                   {"EPILOGUE", {0, 1}},
                                                   {"SPLIT_K", {1}},
                                                   {"BLOCK_N", {128, 256}},
                                                   {"SWAP_AB", {0}},
                                                   {"BLOCK_M", {128}}},
                                                  "sm_90a");
  ASSERT_FALSE(candidates.refused.empty());
  EXPECT_EQ(candidates.accepted.size(), 3 * candidates.refused.size());
  for (const auto &[params, why] : candidates.refused) {
    EXPECT_EQ(params.get("CLUSTER_M").integer(), 2);
    EXPECT_EQ(params.get("CLUSTER_N").integer(), 2);
    EXPECT_EQ(why, "CLUSTER_M and CLUSTER_N make clusters of more than two blocks");
  }
  for (const char *name : {"CLUSTER_M", "CLUSTER_N", "EPILOGUE"})
    EXPECT_TRUE(wgmma.param(name)->param.is_tunable()) << name;
}

TEST(BuiltinRules, RowwiseVariantsMustFitTheRowAndTheWarp) {
  const Template &rms = templates::find("rms_norm");
  auto fits = [&](int hidden, int vec, int threads, std::string_view target) {
    return rms.tuning().fits(
        rms.bind({{"T", "bfloat16"}, {"HIDDEN", hidden}, {"VEC", vec}, {"THREADS", threads}}),
        target);
  };
  EXPECT_EQ(fits(4096, 8, 256, "sm_90a"), "");
  EXPECT_NE(fits(1004, 8, 256, "sm_90a"), ""); // 8 does not divide 1004
  EXPECT_EQ(fits(1004, 4, 256, "sm_90a"), "");
  EXPECT_NE(fits(16384, 2, 32, "sm_90a"), ""); // 256 elements a thread
  EXPECT_NE(fits(4096, 8, 32, "gfx90a"), "");  // less than a 64-wide wavefront
  EXPECT_EQ(rms.tuning().threads(rms.bind({{"T", "half"}, {"HIDDEN", 64}, {"THREADS", 64}})), 256);
  EXPECT_TRUE(rms.param("VEC")->param.is_tunable());
  EXPECT_FALSE(rms.param("HIDDEN")->param.is_tunable());
}

} // namespace
} // namespace kjit

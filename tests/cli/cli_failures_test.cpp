// The command line against input that is not what it expects and a system that refuses: files
// named on the command line that are not regular files, imports that cannot be completed, and
// the exit status of each class of failure (tools/kjit/exit_status.hpp, README.md).
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/library.hpp"
#include "tests/cli/cli_fixture.hpp"
#include "tests/runtime/tuning_records.hpp"

#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace kjit {
namespace {

namespace fs = std::filesystem;
using testing::record_for;
using testing::rms_key;

// Prefixes for CliTest::kjit's `environment`, which a shell runs before `VARIABLE=value kjit ...`.
// A hung command is killed after 20 s and exits 137, which no test accepts: a test cannot hang.
const std::string bounded = "timeout -s KILL 20 env";
// RLIMIT_FSIZE at `blocks` x 512 bytes: a full disk for this command alone, where a write past the
// limit fails with EFBIG (SIGXFSZ ignored, as tests/stress does it).
std::string full_disk_after(int blocks) {
  return "trap '' XFSZ; ulimit -f " + std::to_string(blocks) + "; " + bounded;
}
// The user nobody when this is root (which reads and writes regardless of permissions).
std::string as_a_user() {
  return ::geteuid() == 0
             ? "timeout -s KILL 20 setpriv --reuid=65534 --regid=65534 --clear-groups env"
             : bounded;
}

// A tuning table (`kjit tune export`'s format) of `records`.
std::string table_of(const std::vector<TuningRecord> &records) {
  return tuning_records_json(records);
}

class CliFailures : public CliTest {
protected:
  // Every command that reads a file named on its command line, FILE standing for it.
  const std::vector<std::string> readers = {
      "compile --source FILE --kernel k -p N=1 --target gfx90a",
      "tune rms_norm --shapes FILE",
      "tune import FILE",
      "prebuild --tuned FILE --out " + (dir / "tier").string(),
      "prebuild --sets FILE --targets gfx90a --out " + (dir / "tier").string(),
  };

  // Each reader given `file` ends at once with exit 2 and one line naming the file and `why`.
  void expect_each_reader_refuses(const fs::path &file, const std::string &why,
                                  const std::string &environment = bounded) const {
    for (std::string args : readers) {
      args.replace(args.find("FILE"), 4, file.string());
      const CliRun run = kjit(args, environment);
      EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
      EXPECT_EQ(run.err.rfind("kjit: cannot read ", 0), 0u) << args << "\n" << run.err;
      EXPECT_NE(run.err.find(file.string() + ": " + why), std::string::npos) << args << "\n"
                                                                             << run.err;
      EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    }
  }

  std::vector<std::string> records_listed() const {
    const CliRun run = kjit("tune ls --json");
    EXPECT_EQ(run.status, 0) << run.err;
    const nlohmann::json listed = nlohmann::json::parse(run.out);
    std::vector<std::string> keys;
    for (const auto &record : listed.at("records"))
      keys.push_back(record.at("key"));
    return keys;
  }
};

TEST_F(CliFailures, AFileThatIsNotARegularFileIsRefusedBeforeItIsRead) {
  expect_each_reader_refuses(dir.path(), "it is a directory, not a regular file");
  expect_each_reader_refuses("/dev/zero", "it is a character device, not a regular file");
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_each_reader_refuses(fifo, "it is a FIFO, not a regular file");
  expect_each_reader_refuses(dir / "missing.json", "No such file or directory");
}

TEST_F(CliFailures, AFileTooLargeOrUnreadableIsRefusedWithTheReason) {
  const fs::path large = write_source("large.json", "{}");
  fs::resize_file(large, (std::uintmax_t{64} << 20) + 1); // sparse: costs no disk
  expect_each_reader_refuses(large, "it is larger than 64 MiB");

  const fs::path secret = write_source("secret.json", "{}");
  fs::permissions(dir.path(), fs::perms(0755)); // the user nobody reaches the file, not its bytes
  fs::permissions(secret, fs::perms::none);
  // ... and runs a copy of kjit: the build tree may lie under a folder only root enters (a clone
  // in /root, as in tools/fresh-root-check).
  fs::copy_file(program, dir / "kjit");
  fs::permissions(dir / "kjit", fs::perms(0755));
  program = (dir / "kjit").string();
  expect_each_reader_refuses(secret, "Permission denied", as_a_user());
}

// `kjit tune import` checks every record before it writes one: a file whose second record is bad
// imports nothing.
TEST_F(CliFailures, TuneImportOfABadRecordImportsNothing) {
  const TuningRecord good = record_for(rms_key(1024));
  // Consistent with its key, but its target cannot name a directory.
  const TuningRecord escaping = record_for(rms_key(4096, {"../../x", 132, ""}));
  // Consistent with its key, but VEC=3 is not a value rms_norm takes.
  TuningRecord odd_vector = record_for(rms_key(2048));
  odd_vector.winner.params = {{"THREADS", 256}, {"VEC", 3}};
  for (const auto &[bad, why] : {std::pair{escaping, std::string("cannot name a cache directory")},
                                 std::pair{odd_vector, std::string("VEC = 3 is not allowed")}}) {
    const CliRun run = kjit("tune import " + write_source("table.json", table_of({good, bad})));
    EXPECT_EQ(run.status, 2) << run.err;
    EXPECT_NE(run.err.find("table.json: record 2: "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(why), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("nothing was imported"), std::string::npos) << run.err;
    EXPECT_EQ(records_listed(), std::vector<std::string>{}) << "the good record was imported";
  }
}

// A write that fails halfway (a full disk) says exactly which records were imported and which
// were not, and is an I/O failure (exit 4).
TEST_F(CliFailures, TuneImportOntoAFullDiskNamesWhatWasAndWasNotImported) {
  const TuningRecord small = record_for(rms_key(1024));
  TuningRecord large = record_for(rms_key(4096));
  large.key.device.name = std::string(2048, 'x'); // not keyed: the record's file is larger
  ASSERT_LT(small.to_json().size(), 1024u);
  const std::string table = write_source("table.json", table_of({small, large}));
  const CliRun run = kjit("tune import " + table, full_disk_after(2));
  EXPECT_EQ(run.status, 4) << run.err;
  const std::string small_key = small.key.key().hex(), large_key = large.key.key().hex();
  EXPECT_NE(run.err.find("File too large; imported 1 of 2 tuning records (" +
                         small_key.substr(0, 12) + "), not " + large_key.substr(0, 12)),
            std::string::npos)
      << run.err;
  EXPECT_EQ(records_listed(), std::vector<std::string>{small_key});
}

TEST_F(CliFailures, CacheImportOntoAFullDiskNamesWhatWasNotImported) {
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available";
  auto compile = [this](int n) {
    const CliRun run =
        kjit("compile scale -p T=half -p N=" + std::to_string(n) + " --target gfx90a --json");
    EXPECT_EQ(run.status, 0) << run.err;
    return nlohmann::json::parse(run.out).at("key").get<std::string>();
  };
  const std::string first = compile(64), second = compile(128);
  ASSERT_EQ(kjit("tune import " + write_source("table.json", table_of({record_for(rms_key(1024))})))
                .status,
            0);
  const std::string archive = (dir / "warm.kjitar").string();
  ASSERT_EQ(kjit("cache export " + archive).status, 0);
  ASSERT_EQ(kjit("cache clear").status, 0);
  fs::remove_all(dir / "cache" / "v2" / "tuning"); // `cache clear` keeps the tuning records
  ASSERT_EQ(compile(64), first); // the first entry is there again; the second is not

  // Entries are larger than 1 KiB: the second cannot be written.
  const CliRun run = kjit("cache import " + archive, full_disk_after(2));
  EXPECT_EQ(run.status, 4) << run.err;
  // The archive holds its entries in key order.
  const std::string position = second < first ? "1" : "2";
  EXPECT_NE(run.err.find("the import stopped with 1 of its 2 entries in the cache; not imported: "
                         "entries " +
                         position + " and its 1 tuning record"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(records_listed(), std::vector<std::string>{}) << "records come after the entries";
  // Once there is room, importing again completes it.
  const CliRun again = kjit("cache import --json " + archive);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out).at("entries"), 1);
  EXPECT_EQ(nlohmann::json::parse(again.out).at("skipped"), 1);
  EXPECT_EQ(records_listed().size(), 1u);
}

// One exit status per class of failure, whatever the command: 2 bad usage or input, 1 a check
// found a problem, 4 an I/O failure, 5 kjit or what it loads failed (3, no GPU, below).
TEST_F(CliFailures, EachClassOfFailureHasItsOwnExitStatus) {
  EXPECT_EQ(kjit("frobnicate").status, 2);
  EXPECT_EQ(kjit("compile scale -p T=half -p N=64 --target gfx9000x").status, 2);

  // A planted file that is not an entry: `cache verify` finds it.
  const fs::path planted =
      dir / "cache" / "v2" / "gfx90a" / "aa" / (std::string(64, 'a') + ".kjit");
  fs::create_directories(planted.parent_path());
  std::ofstream(planted) << "not an entry";
  const CliRun verify = kjit("cache verify");
  EXPECT_EQ(verify.status, 1) << verify.out << verify.err;

  // An I/O failure: the disk is full for the file being written.
  // Three records make a table of more than 1 KiB.
  ASSERT_EQ(kjit("tune import " +
                 write_source("records.json",
                              table_of({record_for(rms_key(1024)), record_for(rms_key(2048)),
                                        record_for(rms_key(4096))})))
                .status,
            0);
  const CliRun full = kjit("tune export " + (dir / "table.json").string(), full_disk_after(2));
  EXPECT_EQ(full.status, 4) << full.err;
  EXPECT_NE(full.err.find("cannot write"), std::string::npos) << full.err;

  // kjit or what it loads failed: a compiler library that is not where ROCM_PATH says, and an
  // exception that is not a kjit::Error (a prebuild worker handed a batch that is not a number).
  const CliRun no_hiprtc =
      kjit("compile scale -p T=half -p N=64 --target gfx90a", "ROCM_PATH=" + dir.path().string());
  EXPECT_EQ(no_hiprtc.status, 5) << no_hiprtc.err;
  EXPECT_NE(no_hiprtc.err.find("holds no hiprtc"), std::string::npos) << no_hiprtc.err;
  if (!hiprtc_available())
    GTEST_SKIP() << "hiprtc is not available: a prebuild worker for gfx90a cannot start";
  const CliRun worker =
      kjit("__prebuild-worker --targets gfx90a --level 3 --out " + (dir / "t").string(),
           "echo not-a-batch |");
  EXPECT_EQ(worker.status, 5) << worker.err;
  EXPECT_EQ(worker.err.rfind("kjit: internal error: ", 0), 0u) << worker.err;
}

// Without a GPU, the commands that need one say so alike: exit 3.
TEST_F(CliFailures, NoGpuIsExitThreeForTuningAndPrebuildingForTheGpusFound) {
  const std::string shapes =
      write_source("shapes.json", R"({"types": ["bfloat16"], "rows": [64], "lengths": [4096]})");
  const CliRun tune = kjit("tune rms_norm --shapes " + shapes);
  if (tune.status == 0)
    GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(tune.status, 3) << tune.err;
  const CliRun native = kjit("prebuild --targets native --level 3 --out " + (dir / "t").string());
  EXPECT_EQ(native.status, 3) << native.err;
  EXPECT_EQ(native.err.rfind("kjit: ", 0), 0u) << native.err;
}

} // namespace
} // namespace kjit

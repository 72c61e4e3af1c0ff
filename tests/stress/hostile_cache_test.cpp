// Caches that kjit cannot or must not use as they are: unwritable, full, read-only, on an unusual
// path, owned or writable by others, and names that try to leave the cache. kjit keeps working
// from memory and warns once, never loads what another user could have planted, and never lets
// key text become a path. Real NVRTC. Permission checks run in a child that drops root for the
// user nobody, since root would write regardless of permissions.
#include "child.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/layout.hpp"
#include "kjit/kjit.hpp"
#include "kjit/templates/library.hpp"
#include "tests/support/files.hpp"
#include "tests/support/log_capture.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <functional>
#include <gtest/gtest.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace kjit::testing {
namespace {

namespace fs = std::filesystem;
using Environment = std::vector<std::pair<std::string, std::string>>;

constexpr uid_t nobody = 65534;

class HostileCache : public ::testing::Test {
protected:
  void SetUp() override {
    try {
      Runtime(config(cache)).compiler(Vendor::nvidia);
    } catch (const Error &error) {
      GTEST_SKIP() << "NVRTC is not available: " << error.summary();
    }
    fs::permissions(scratch.path(), fs::perms(0755)); // the user nobody reaches what it is given
  }
  Config config(const fs::path &cache_dir) const {
    Config config;
    config.cache_dir = cache_dir;
    config.prebuilt_dir = scratch.path() / "no-prebuilt";
    return config;
  }
  // A child asking 4 threads for scale<float, n> on sm_90, with `more` arguments.
  ChildOutcome ask(int n, std::vector<std::string> more, const Environment &environment = {}) {
    std::vector<std::string> arguments = {
        "--target", "sm_90", "-p", "T=float", "-p", "N=" + std::to_string(n), "--threads", "4"};
    arguments.insert(arguments.end(), more.begin(), more.end());
    return run_child(arguments, environment, scratch.path());
  }
  // Arguments that run the child as a user for whom `directory` is not writable: nobody when
  // this is root (which writes regardless of permissions), else this user, once it is 0555.
  std::vector<std::string> as_a_user_who_cannot_write(const fs::path &directory) {
    fs::permissions(directory, fs::perms(0555));
    if (::geteuid() == 0)
      return {"--as-uid", std::to_string(nobody)};
    return {};
  }

  testing::TempDir scratch;
  fs::path cache = scratch.path() / "cache";
};

TEST_F(HostileCache, AnUnwritableCacheDirectoryKeepsVariantsInMemoryWithOneWarning) {
  fs::create_directory(cache);
  std::vector<std::string> arguments = as_a_user_who_cannot_write(cache);
  arguments.insert(arguments.end(), {"--cache", cache.string()});
  const ChildOutcome outcome = ask(64, arguments);
  EXPECT_TRUE(outcome.succeeded()) << outcome.out << outcome.err;
  EXPECT_EQ(outcome.number("compiled"), 1u) << outcome.out;
  EXPECT_EQ(outcome.number("valid"), 4u);
  EXPECT_EQ(outcome.warnings(), 1) << outcome.err;
  EXPECT_NE(outcome.err.find("kept in memory only"), std::string::npos) << outcome.err;
  EXPECT_TRUE(fs::is_empty(cache));
}

TEST_F(HostileCache, AFullDiskKeepsVariantsInMemoryWithOneWarningAndLeavesNoTempFile) {
  // RLIMIT_FSIZE makes every write past 256 bytes fail (EFBIG) in the child: a disk that fills
  // up under the entry, with no mount needed.
  const ChildOutcome outcome = ask(64, {"--cache", cache.string(), "--file-size-limit", "256"});
  EXPECT_TRUE(outcome.succeeded()) << outcome.out << outcome.err;
  EXPECT_EQ(outcome.number("compiled"), 1u) << outcome.out;
  EXPECT_EQ(outcome.number("valid"), 4u);
  EXPECT_EQ(outcome.warnings(), 1) << outcome.err;
  EXPECT_NE(outcome.err.find("File too large"), std::string::npos) << outcome.err;
  EXPECT_TRUE(temp_files_under(cache).empty());
  EXPECT_TRUE(cache::scan(cache::DiskStore(cache, cache::Access::read_only)).empty());
}

TEST_F(HostileCache, AReadOnlyPrebuiltTierServesAndIsNeverWritten) {
  const fs::path prebuilt = scratch.path() / "prebuilt";
  ASSERT_EQ(ask(64, {"--cache", prebuilt.string()}).number("compiled"), 1u);
  // Installed read-only for everyone: directories 0555, files 0444.
  for (const auto &item : fs::recursive_directory_iterator(prebuilt))
    fs::permissions(item.path(), item.is_directory() ? fs::perms(0555) : fs::perms(0444));
  const std::set<std::string> installed = tree(prebuilt);

  const fs::path own_cache = scratch.path() / "own";
  fs::create_directory(own_cache);
  std::vector<std::string> as_user = as_a_user_who_cannot_write(prebuilt);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(own_cache.c_str(), nobody, nobody), 0);
  }
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.end(), as_user.begin(), as_user.end());
    more.insert(more.end(), {"--prebuilt", prebuilt.string()});
    return more;
  };
  const ChildOutcome hit = ask(64, with({"--cache", own_cache.string()}));
  EXPECT_TRUE(hit.succeeded()) << hit.out << hit.err;
  EXPECT_EQ(hit.number("prebuilt_hits"), 1u) << hit.out;
  EXPECT_EQ(hit.number("compiled"), 0u);
  EXPECT_EQ(hit.warnings(), 0) << hit.err;

  // The user tier pointed at the read-only tier itself: hits still come from it, a miss is
  // compiled and kept in memory, with one warning.
  const ChildOutcome same_hit = ask(64, with({"--cache", prebuilt.string()}));
  EXPECT_EQ(same_hit.number("prebuilt_hits"), 1u) << same_hit.out << same_hit.err;
  EXPECT_EQ(same_hit.warnings(), 0) << same_hit.err;
  const ChildOutcome miss = ask(128, with({"--cache", prebuilt.string()}));
  EXPECT_TRUE(miss.succeeded()) << miss.out << miss.err;
  EXPECT_EQ(miss.number("compiled"), 1u) << miss.out;
  EXPECT_EQ(miss.warnings(), 1) << miss.err;
  EXPECT_EQ(tree(prebuilt), installed) << "the prebuilt tier is unchanged";
}

TEST_F(HostileCache, ACacheOnAPathWithSpacesAndUnicodeWorks) {
  const fs::path unusual = scratch.path() / "cache dir with spaces" / "ünïcödé ✓ кэш 缓存";
  const ChildOutcome first = ask(64, {"--cache", unusual.string()});
  EXPECT_TRUE(first.succeeded()) << first.out << first.err;
  EXPECT_EQ(first.number("compiled"), 1u);
  const ChildOutcome second = ask(64, {"--cache", unusual.string()});
  EXPECT_EQ(second.number("user_hits"), 1u) << second.out << second.err;
  EXPECT_EQ(first.warnings() + second.warnings(), 0) << first.err << second.err;

  const ChildOutcome verify = run_kjit({"cache", "verify"}, unusual, scratch.path());
  EXPECT_EQ(verify.status, 0) << verify.out << verify.err;
  const ChildOutcome listed = run_kjit({"cache", "ls"}, unusual, scratch.path());
  EXPECT_NE(listed.out.find("scale"), std::string::npos) << listed.out << listed.err;
}

TEST_F(HostileCache, TheDefaultUserTierIsCreatedPrivateWhateverTheUmask) {
  const fs::path xdg = scratch.path() / "xdg";
  const mode_t umask_before = ::umask(0); // the child inherits it: files would be 0666, dirs 0777
  const ChildOutcome outcome =
      ask(64, {}, {{"XDG_CACHE_HOME", xdg.string()}, {"KJIT_CACHE_DIR", ""}});
  ::umask(umask_before);
  ASSERT_TRUE(outcome.succeeded()) << outcome.out << outcome.err;
  const fs::path root = xdg / "kjit";
  std::size_t entries = 0;
  EXPECT_EQ(mode_of(xdg), 0700u);
  EXPECT_EQ(mode_of(root), 0700u);
  for (const auto &item : fs::recursive_directory_iterator(root)) {
    const bool entry = item.path().extension() == ".kjit";
    entries += entry;
    if (item.is_directory())
      EXPECT_EQ(mode_of(item.path()), 0700u) << item.path();
    else
      EXPECT_EQ(mode_of(item.path()) & 077, 0u) << item.path() << ": readable by others";
  }
  EXPECT_EQ(entries, 1u);
}

// What another user could have planted or changed is not loaded, and verify says why.
struct Untrusted {
  const char *name;
  const char *reason;
  bool needs_root; // giving a file away takes root
  std::function<void(const fs::path &entry)> apply;
};

void PrintTo(const Untrusted &way, std::ostream *out) { *out << way.name; }

const Untrusted untrusted[] = {
    {"file_owned_by_another_user", "file is owned by uid 12345", true,
     [](const fs::path &entry) { ASSERT_EQ(::chown(entry.c_str(), 12345, 12345), 0); }},
    {"directory_owned_by_another_user", "its directory is owned by uid 12345", true,
     [](const fs::path &entry) {
       ASSERT_EQ(::chown(entry.parent_path().c_str(), 12345, 12345), 0);
     }},
    {"file_writable_by_group", "file is writable by group or others (mode 620)", false,
     [](const fs::path &entry) { fs::permissions(entry, fs::perms(0620)); }},
    {"directory_writable_by_others", "its directory is writable by group or others (mode 703)",
     false, [](const fs::path &entry) { fs::permissions(entry.parent_path(), fs::perms(0703)); }},
};

class UntrustedEntry : public HostileCache, public ::testing::WithParamInterface<Untrusted> {};

TEST_P(UntrustedEntry, IsNotLoadedAndVerifyReportsIt) {
  if (GetParam().needs_root && ::geteuid() != 0)
    GTEST_SKIP() << "only root can give a file away";
  const Template &scale = templates::find("scale");
  const ParamValues params = {{"T", "float"}, {"N", 64}};
  const jit::Target sm_90 = jit::Target::parse("sm_90");
  fs::path entry;
  {
    Runtime rt(config(cache));
    entry = rt.compile(scale, params, sm_90).entry_path();
  }
  GetParam().apply(entry);

  const ChildOutcome verify = run_kjit({"cache", "verify"}, cache, scratch.path());
  EXPECT_EQ(verify.status >> 8, 1) << verify.out << verify.err;
  EXPECT_NE(verify.out.find(GetParam().reason), std::string::npos) << verify.out;

  LogCapture captured;
  Runtime rt(config(cache));
  EXPECT_EQ(rt.compile(scale, params, sm_90).origin(), Origin::compiled) << "not loaded";
  EXPECT_NE(captured.text().find(GetParam().reason), std::string::npos) << captured.text();
}

INSTANTIATE_TEST_SUITE_P(EveryWay, UntrustedEntry, ::testing::ValuesIn(untrusted),
                         [](const auto &info) { return std::string(info.param.name); });

// Template and parameter names are identifiers, checked before anything is hashed; only the
// key's hex digits and the validated target id ever name a file.
TEST_F(HostileCache, NamesThatTryToLeaveTheCacheAreRefusedAndCreateNothing) {
  const fs::path inner = scratch.path() / "a" / "b";
  const fs::path inner_cache = inner / "cache";
  for (const char *name : {"../../x", "..", "x/../../y", "/etc/x"}) {
    SCOPED_TRACE(name);
    EXPECT_THROW(Template(name, "__global__ void k() {}", {}), Error);
    EXPECT_THROW(Template("k", "template <typename T> __global__ void k() {}",
                          {{name, ParamSchema::type({"float"})}}),
                 Error);
  }
  const fs::path source = scratch.path() / "k.cu";
  std::ofstream(source) << "template <typename T> __global__ void k(T *x) {}\n";
  for (const std::vector<std::string> &arguments : std::vector<std::vector<std::string>>{
           {"compile", "--source", source.string(), "--kernel", "../../x", "-p", "T=float",
            "--target", "sm_90"},
           {"compile", "--source", source.string(), "--kernel", "k", "-p", "../../y=float",
            "--target", "sm_90"},
           {"compile", "--source", source.string(), "--kernel", "k", "-p", "T=../../z", "--target",
            "sm_90"},
           {"compile", "scale", "-p", "T=float", "-p", "N=1", "--target", "../../w"},
           {"cache", "show", "../../../etc/passwd"}}) {
    const ChildOutcome run = run_kjit(arguments, inner_cache, scratch.path());
    EXPECT_EQ(run.status >> 8, 2) << arguments[3] << ": " << run.out << run.err;
  }
  for (const auto &item : fs::recursive_directory_iterator(scratch.path())) {
    const std::string name = item.path().filename().string();
    EXPECT_TRUE(name != "x" && name != "y" && name != "z" && name != "w") << item.path();
  }
  EXPECT_FALSE(fs::exists(cache::Layout(inner_cache).version_directory() / "sm_90"))
      << "nothing was compiled";
}

} // namespace
} // namespace kjit::testing

// `kjit cache`: its options, and what each of its commands computes (cache_reports.hpp), from the
// local tiers or, for ls --remote, verify --remote, push and pull, the remotes.
#include "cache_command.hpp"

#include "cache_reports.hpp"
#include "exit_status.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/kjit.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/local_tiers.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/units.hpp"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <spawn.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>

extern char **environ;

namespace kjit::cli {
namespace {

// ---- the local tiers --------------------------------------------------------------------------

// The local tiers as the environment configures them (KJIT_CACHE_DIR, KJIT_PREBUILT_DIR), built as
// a Runtime builds them; unlike a Runtime, the commands need a user tier.
struct Tiers : LocalTiers {
  Config config;

  Tiers() : Tiers(Config::from_environment()) {}
  explicit Tiers(Config from) : LocalTiers(from), config(std::move(from)) {
    if (!user)
      throw Error(Errc::bad_config, "no cache directory: set KJIT_CACHE_DIR (HOME is not set)");
  }
};

struct Listed {
  cache::StoredEntry stored;
  const cache::DiskStore *store;
  std::string tier; // "user", "prebuilt"
};

std::vector<Listed> list_entries(const Tiers &tiers) {
  std::vector<Listed> all;
  for (auto [store, tier] : tiers.present())
    for (cache::StoredEntry &stored : cache::scan(*store))
      all.push_back({std::move(stored), store, std::string(tier)});
  return all;
}

// ---- the remotes ------------------------------------------------------------------------------

const std::vector<cache::RemoteStorage> &configured_remotes(const Config &config) {
  if (config.remote.empty())
    throw Error(Errc::bad_config,
                "no remote cache: set KJIT_REMOTE_STORAGE (e.g. redis://host:6379; see README)");
  return config.remote;
}

// The value of a remote operation; Error(cache_io) naming the remote and the fault when it failed.
template <typename T>
T value_of(cache::RemoteResult<T> result, const cache::RemoteStorage &remote,
           std::string_view doing) {
  if (!result.ok())
    throw Error(Errc::cache_io, "remote cache " + remote.description + ", " + std::string(doing) +
                                    ": " + result.fault().message + " (" +
                                    std::string(to_string(result.fault().failure)) + ")");
  return std::move(result.value());
}

// Walks `remote`'s entry records (SCAN), only `target`'s when it is not empty.
void walk(const cache::RemoteStorage &remote, const std::string &target,
          const std::function<void(const cache::RecordKey &)> &visit) {
  if (!remote.listing)
    throw Error(Errc::bad_usage, "remote cache " + remote.description + " cannot list its records");
  value_of(remote.listing->scan(cache::kEntryRecord,
                                [&](const cache::RecordKey &record) {
                                  if (target.empty() || record.target == target)
                                    visit(record);
                                }),
           remote, "listing its records");
}

// A remote value checked as untrusted input: "" when it is a valid entry for `record`, else why
// not. nullopt when the record is gone (removed since it was listed).
struct Checked {
  std::optional<cache::Entry> entry;
  std::string problem;
};
std::optional<Checked> check(const cache::RemoteStorage &remote, const cache::RecordKey &record) {
  auto got = remote.backend->get(record);
  if (!got.ok() && got.fault().failure == cache::RemoteFailure::refused)
    return Checked{std::nullopt, got.fault().message};
  std::optional<std::vector<std::byte>> value =
      value_of(std::move(got), remote, "reading " + cache::storage_name(record));
  if (!value)
    return std::nullopt;
  cache::Decoded decoded = cache::decode_record_entry(*value, record);
  return Checked{std::move(decoded.entry), std::move(decoded.problem)};
}

// The canonical id of a --target, "" when none is given.
std::string canonical_target(const std::string &text) {
  return text.empty() ? "" : jit::Target::parse(text).id();
}

// ---- ls ---------------------------------------------------------------------------------------

// How --sort orders entries: whether entry `a` comes before `b`.
using EntryOrder = std::function<bool(std::size_t a, std::size_t b)>;

EntryOrder sort_order(const std::string &sort, const std::vector<TierEntry> &entries) {
  static const std::string unknown_template;
  auto template_of = [&](std::size_t i) -> const std::string & {
    return entries[i].listed.summary ? entries[i].listed.summary->template_name : unknown_template;
  };
  auto stored = [&](std::size_t i) -> const cache::StoredEntry & {
    return entries[i].listed.stored;
  };
  if (sort == "recent")
    return
        [=](std::size_t a, std::size_t b) { return stored(a).last_use_ns > stored(b).last_use_ns; };
  if (sort == "size")
    return [=](std::size_t a, std::size_t b) { return stored(a).bytes > stored(b).bytes; };
  if (sort == "template")
    return [=](std::size_t a, std::size_t b) {
      return std::forward_as_tuple(template_of(a), stored(a).target) <
             std::forward_as_tuple(template_of(b), stored(b).target);
    };
  if (sort == "target")
    return [=](std::size_t a, std::size_t b) {
      return std::forward_as_tuple(stored(a).target, template_of(a)) <
             std::forward_as_tuple(stored(b).target, template_of(b));
    };
  throw Error(Errc::bad_usage, "--sort " + sort + ": expected recent, size, template or target");
}

// The entries of both tiers with their header summaries (only --target's, --template's).
LocalListing list_local(const CacheArgs &args) {
  const Tiers tiers;
  LocalListing listing;
  for (auto [store, tier] : tiers.present())
    for (cache::ListedEntry &listed : cache::list(*store, args.target))
      listing.entries.push_back({std::move(listed), std::string(tier)});
  for (std::size_t i = 0; i < listing.entries.size(); ++i)
    if (const auto &summary = listing.entries[i].listed.summary;
        args.template_name.empty() || (summary && summary->template_name == args.template_name))
      listing.order.push_back(i);
  std::stable_sort(listing.order.begin(), listing.order.end(),
                   sort_order(args.sort, listing.entries));
  return listing;
}

RemoteListing list_remote(const Config &config, const std::string &target, std::size_t limit) {
  RemoteListing listing;
  listing.limit = limit;
  for (const cache::RemoteStorage &remote : configured_remotes(config)) {
    RemoteListing::Remote &listed = listing.remotes.emplace_back();
    listed.description = remote.description;
    walk(remote, target, [&](const cache::RecordKey &record) {
      if (listed.entries++ < limit)
        listed.shown.push_back(record);
    });
  }
  return listing;
}

// ---- stats ------------------------------------------------------------------------------------

CacheStats gather_stats() {
  const Tiers tiers;
  const std::vector<Listed> entries = list_entries(tiers);
  // Keyed by views into `entries`: no strings are built per entry.
  std::map<std::pair<std::string_view, std::string_view>, TierTotals> by_tier_target;
  for (const Listed &entry : entries) {
    TierTotals &totals = by_tier_target[{entry.tier, entry.stored.target}];
    ++totals.entries;
    totals.bytes += entry.stored.bytes;
  }
  CacheStats stats;
  stats.cache_dir = tiers.config.cache_dir.string();
  stats.prebuilt_dir = tiers.config.prebuilt_dir.string();
  stats.prebuilt_present = tiers.prebuilt.has_value();
  for (const cache::DiskStore &store : tiers.prebuilt_path)
    stats.prebuilt_path.push_back(store.root().string());
  for (auto &[where, totals] : by_tier_target) {
    totals.tier = where.first;
    totals.target = where.second;
    stats.tiers.push_back(std::move(totals));
  }
  stats.counters = cache::StatsFiles(tiers.user->stats_directory()).total();
  return stats;
}

// ---- show -------------------------------------------------------------------------------------

const Listed &find_by_prefix(const std::vector<Listed> &entries, const std::string &prefix) {
  const bool hex = !prefix.empty() && prefix.size() <= 64 &&
                   prefix.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex)
    throw Error(Errc::bad_usage,
                "'" + prefix + "' is not a key prefix (1 to 64 lowercase hex digits)");
  std::vector<const Listed *> found;
  for (const Listed &entry : entries)
    if (entry.stored.key.hex().starts_with(prefix))
      found.push_back(&entry);
  if (found.empty())
    throw Error(Errc::bad_usage, "no cache entry has a key starting with " + prefix);
  if (found.size() > 1) {
    std::string candidates;
    for (const Listed *entry : found) {
      if (!candidates.empty()) // appended piece by piece: GCC 12 warns wrongly on "\n" + string
        candidates += '\n';
      candidates += entry->stored.key.hex() + "  " + entry->stored.target + "  " + entry->tier;
    }
    throw Error(Errc::bad_usage,
                "key prefix " + prefix + " is ambiguous: " + std::to_string(found.size()) +
                    " entries match; give more digits",
                candidates);
  }
  return *found.front();
}

ShownEntry show_entry(const std::string &key_prefix) {
  const Tiers tiers;
  const std::vector<Listed> entries = list_entries(tiers);
  const Listed &chosen = find_by_prefix(entries, key_prefix);
  ShownEntry shown;
  shown.stored = chosen.stored;
  shown.tier = chosen.tier;
  shown.problem = cache::verify(*chosen.store, chosen.stored);
  shown.entry = chosen.store->read(chosen.stored.key, chosen.stored.target).entry;
  shown.header = shown.entry ? shown.entry->header
                             : cache::read_header(chosen.stored.path, shown.header_problem);
  if (shown.entry)
    shown.resources = jit::read_kernel_resources(shown.entry->code);
  return shown;
}

// The disassembler for `target`'s code objects, or "" with `looked_for` naming what was tried.
std::string find_disassembler(const jit::Target &target, std::string &looked_for) {
  const std::vector<std::string> candidates =
      target.vendor() == Vendor::amd
          ? std::vector<std::string>{"llvm-objdump", "/opt/rocm/llvm/bin/llvm-objdump"}
          : std::vector<std::string>{"nvdisasm", "/usr/local/cuda/bin/nvdisasm"};
  for (const std::string &candidate : candidates) {
    looked_for += (looked_for.empty() ? "" : ", ") + candidate;
    if (candidate.front() == '/') {
      if (::access(candidate.c_str(), X_OK) == 0)
        return candidate;
      continue;
    }
    const char *path = std::getenv("PATH");
    std::string_view directories = path != nullptr ? path : "";
    while (!directories.empty()) {
      const std::size_t colon = directories.find(':');
      std::string full = std::string(directories.substr(0, colon)) + "/" + candidate;
      if (::access(full.c_str(), X_OK) == 0)
        return full;
      directories = colon == std::string_view::npos ? "" : directories.substr(colon + 1);
    }
  }
  return {};
}

// Writes the code object to a temp file and runs the vendor's disassembler on it; its output goes
// straight to ours.
int disassemble(const cache::Entry &entry) {
  const jit::Target target = jit::Target::parse(entry.header.target);
  std::string looked_for;
  const std::string tool = find_disassembler(target, looked_for);
  if (tool.empty())
    throw Error(Errc::process_error,
                "no disassembler for " + target.id() + " found (looked for " + looked_for + ")");
  char temp[] = "/tmp/kjit-code-XXXXXX";
  const int fd = ::mkstemp(temp);
  if (fd < 0)
    throw Error(Errc::file_io, "cannot create a temp file for the code object");
  const bool written =
      ::write(fd, entry.code.data(), entry.code.size()) == static_cast<ssize_t>(entry.code.size());
  ::close(fd);
  std::vector<std::string> argv_text = {tool};
  if (target.vendor() == Vendor::amd)
    argv_text.insert(argv_text.end(), {"-d", "--mcpu=" + target.arch()});
  argv_text.push_back(temp);
  std::vector<char *> argv;
  for (std::string &arg : argv_text)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::cout << std::flush;
  // Its stderr is kept, so that a failure carries the disassembler's own reason.
  const std::string errors = std::string(temp) + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, errors.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  int status = -1;
  const int spawned =
      written ? ::posix_spawn(&pid, tool.c_str(), &actions, nullptr, argv.data(), environ) : 0;
  posix_spawn_file_actions_destroy(&actions);
  if (written && spawned == 0)
    ::waitpid(pid, &status, 0);
  ::unlink(temp);
  std::string said;
  {
    std::ifstream in(errors);
    said.assign(std::istreambuf_iterator<char>(in), {});
  }
  ::unlink(errors.c_str());
  if (!written)
    throw Error(Errc::file_io, "cannot write the code object to a temp file");
  if (spawned != 0)
    throw Error(Errc::process_error, "cannot run " + tool + ": " + std::strerror(spawned));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!said.empty() && said.back() == '\n')
      said.pop_back();
    throw Error(Errc::process_error,
                tool + " could not disassemble the code object (" +
                    (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                       : "signal " + std::to_string(WTERMSIG(status))) +
                    (said.empty() ? "; it said nothing)" : "); it said:"),
                said);
  }
  std::cerr << said;
  return 0;
}

// ---- verify -----------------------------------------------------------------------------------

VerifyReport verify_local(bool fix) {
  const Tiers tiers;
  const std::vector<Listed> entries = list_entries(tiers);
  VerifyReport report;
  report.checked = entries.size();
  for (const Listed &entry : entries) {
    std::string problem = cache::verify(*entry.store, entry.stored);
    if (problem.empty())
      continue;
    std::string action = "none";
    if (fix) {
      if (entry.store->access() == cache::Access::read_only)
        action = "kept (read-only tier)";
      else if (std::string refused = entry.store->remove(entry.stored.key, entry.stored.target);
               refused.empty())
        action = "removed";
      else
        action = "kept: " + refused;
    }
    report.bad.push_back({entry.stored.key.hex(), entry.stored.target, entry.tier,
                          entry.stored.path, std::move(problem), std::move(action)});
  }
  return report;
}

VerifyReport verify_remote(const Config &config, bool fix) {
  VerifyReport report;
  report.remote = true;
  for (const cache::RemoteStorage &remote : configured_remotes(config)) {
    std::vector<cache::RecordKey> records; // listed first: the walk holds the connection
    walk(remote, "", [&](const cache::RecordKey &record) { records.push_back(record); });
    for (const cache::RecordKey &record : records) {
      std::optional<Checked> found = check(remote, record);
      if (!found)
        continue;
      ++report.checked;
      if (found->entry)
        continue;
      std::string action = "none";
      if (fix)
        action = remote.read_only ? "kept (read-only remote)"
                 : value_of(remote.backend->remove(record), remote, "removing a bad value")
                     ? "removed"
                     : "already gone";
      report.bad.push_back({record.key.hex(), record.target, remote.description,
                            cache::storage_name(record), std::move(found->problem),
                            std::move(action)});
    }
  }
  return report;
}

// ---- prune ------------------------------------------------------------------------------------

cache::PruneResult prune(const CacheArgs &args) {
  if (args.max_size.empty() && args.older_than.empty())
    throw Error(Errc::bad_usage, "prune needs --max-size SIZE and/or --older-than AGE");
  std::optional<std::uint64_t> max_bytes;
  if (!args.max_size.empty() && !(max_bytes = parse_size(args.max_size)))
    throw Error(Errc::bad_usage,
                "--max-size " + args.max_size + ": expected a size such as 500M, 2G or 1048576");
  std::optional<std::int64_t> unused_since_ns;
  if (!args.older_than.empty()) {
    const std::optional<std::int64_t> seconds = parse_duration_seconds(args.older_than);
    if (!seconds)
      throw Error(Errc::bad_usage, "--older-than " + args.older_than +
                                       ": expected an age such as 30m, 12h, 7d or 2w, at most "
                                       "1000 years");
    // An age reaching past the earliest time kjit can count (1677) is "nothing is that old":
    // the cutoff saturates rather than wraps into the future, which removed every entry.
    std::int64_t cutoff = 0;
    if (__builtin_sub_overflow(cache::unix_now_ns(), cache::saturating_ns(*seconds), &cutoff))
      cutoff = std::numeric_limits<std::int64_t>::min();
    unused_since_ns = cutoff;
  }
  const Tiers tiers;
  return cache::prune(*tiers.user, max_bytes, unused_since_ns);
}

// ---- push, pull -------------------------------------------------------------------------------

// The records KEY... --target name; nullopt when no key is given (every record, or only
// --target's).
std::optional<std::vector<cache::RecordKey>> named_records(const CacheArgs &args,
                                                           const std::string &target) {
  if (args.keys.empty())
    return std::nullopt;
  if (target.empty())
    throw Error(Errc::bad_usage, "KEY... needs --target, the target the keys were built for");
  std::vector<cache::RecordKey> records;
  for (const std::string &text : args.keys) {
    const std::optional<cache::Key> key = cache::Key::from_hex(text);
    if (!key)
      throw Error(Errc::bad_usage, "'" + text + "' is not a key (64 lowercase hex digits)");
    records.push_back({cache::kEntryRecord, target, *key});
  }
  return records;
}

void check_tier_name(const std::string &tier) {
  if (tier != "user" && tier != "prebuilt")
    throw Error(Errc::bad_usage, "--tier " + tier + ": expected user or prebuilt");
}

PushReport push(const Config &config, const CacheArgs &args) {
  check_tier_name(args.tier);
  const LocalTiers tiers(config);
  const cache::DiskStore *store = args.tier == "user"
                                      ? (tiers.user ? &*tiers.user : nullptr)
                                      : (tiers.prebuilt ? &*tiers.prebuilt : nullptr);
  if (!store)
    throw Error(Errc::bad_config,
                "no " + args.tier + " tier (" +
                    (args.tier == "user" ? config.cache_dir : config.prebuilt_dir).string() + ")");
  std::vector<const cache::RemoteStorage *> writable;
  for (const cache::RemoteStorage &remote : configured_remotes(config))
    if (!remote.read_only)
      writable.push_back(&remote);
  if (writable.empty())
    throw Error(Errc::bad_usage,
                "every remote of KJIT_REMOTE_STORAGE is read-only: nowhere to push");
  const std::string target = canonical_target(args.target);
  std::vector<cache::RecordKey> records;
  if (auto named = named_records(args, target))
    records = std::move(*named);
  else
    for (const cache::StoredEntry &stored : cache::scan(*store))
      if (target.empty() || stored.target == target)
        records.push_back({cache::kEntryRecord, stored.target, stored.key});

  PushReport report;
  report.tier = args.tier;
  for (const cache::RemoteStorage *remote : writable)
    report.remotes.push_back({remote->description});
  for (const cache::RecordKey &record : records) {
    cache::Lookup found = store->read(record.key, record.target);
    if (found.status == cache::Lookup::Status::miss) {
      report.missing.push_back(record);
      continue;
    }
    if (found.status != cache::Lookup::Status::hit) {
      ++report.invalid;
      continue;
    }
    const std::vector<std::byte> bytes = cache::encode_entry(*found.entry);
    if (!cache::decode_record_entry(bytes, record).entry) { // what no remote reader would take
      ++report.invalid;
      continue;
    }
    ++report.entries;
    for (std::size_t i = 0; i < writable.size(); ++i)
      ++(value_of(writable[i]->backend->put(record, bytes, cache::PutMode::only_if_absent),
                  *writable[i],
                  "publishing " + cache::storage_name(record)) == cache::PutOutcome::stored
             ? report.remotes[i].stored
             : report.remotes[i].already_present);
  }
  return report;
}

// Where pull writes: the user tier, or the prebuilt tier (KJIT_PREBUILT_DIR), which a build
// machine fills as `kjit prebuild --out` does, created when it does not exist yet.
cache::DiskStore pull_destination(const Config &config, const std::string &tier) {
  check_tier_name(tier);
  const std::filesystem::path &root = tier == "user" ? config.cache_dir : config.prebuilt_dir;
  if (root.empty())
    throw Error(Errc::bad_config, tier == "user"
                                      ? "no cache directory: set KJIT_CACHE_DIR (HOME is not set)"
                                      : "no prebuilt directory: set KJIT_PREBUILT_DIR");
  return cache::DiskStore(root, cache::Access::read_write);
}

PullReport pull(const Config &config, const CacheArgs &args) {
  const cache::DiskStore destination = pull_destination(config, args.tier);
  const std::vector<cache::RemoteStorage> &remotes = configured_remotes(config);
  const std::string target = canonical_target(args.target);

  std::vector<cache::RecordKey> wanted;
  if (auto named = named_records(args, target))
    wanted = std::move(*named);
  else {
    std::set<std::string> seen;
    for (const cache::RemoteStorage &remote : remotes)
      walk(remote, target, [&](const cache::RecordKey &record) {
        if (seen.insert(cache::storage_name(record)).second)
          wanted.push_back(record);
      });
  }

  PullReport report;
  report.tier = args.tier;
  report.destination = destination.root().string();
  for (const cache::RecordKey &record : wanted) {
    if (destination.read(record.key, record.target).status == cache::Lookup::Status::hit) {
      ++report.already_present;
      continue;
    }
    std::string problem;
    bool kept = false;
    for (const cache::RemoteStorage &remote : remotes) {
      std::optional<Checked> found = check(remote, record);
      if (!found)
        continue;
      if (!found->entry) {
        problem = remote.description + ": " + found->problem;
        continue;
      }
      destination.write(*found->entry);
      kept = true;
      break;
    }
    if (kept)
      ++report.pulled;
    else if (!problem.empty())
      report.rejected.push_back({record, std::move(problem)});
    else
      report.missing.push_back(record);
  }
  return report;
}

// ---- the commands -----------------------------------------------------------------------------

bool uses_remotes(const std::string &command, const CacheArgs &args) {
  return command == "push" || command == "pull" ||
         ((command == "ls" || command == "verify") && args.remote);
}

// Exit status 0 when `clean`, else 1 (the command found a problem).
int found_problems(bool clean) { return clean ? exit_success : exit_check_failed; }

} // namespace

CLI::App *add_cache_command(CLI::App &app, CacheArgs &args, bool &as_json) {
  CLI::App *cache = app.add_subcommand("cache", "inspect and manage the cache");
  cache->require_subcommand(1);
  constexpr const char *remote_flag =
      "the remotes of KJIT_REMOTE_STORAGE instead of the local tiers";
  CLI::App *ls = cache->add_subcommand("ls", "list entries of both tiers");
  ls->add_option("--target", args.target, "only entries for this target id");
  ls->add_option("--template", args.template_name, "only entries of this template");
  ls->add_option("--sort", args.sort, "recent (default), size, template or target");
  ls->add_flag("--remote", args.remote, remote_flag);
  ls->add_option("--limit", args.limit, "with --remote: list at most this many (all are counted)");
  cache->add_subcommand("stats", "entries and bytes per tier and target; hits, misses, compiles");
  CLI::App *show = cache->add_subcommand("show", "one entry: header, key inputs, kernels");
  show->add_option("key", args.key_prefix, "the key or a unique prefix of it")->required();
  show->add_flag("--disassemble", args.disassemble, "disassemble the code object");
  CLI::App *verify = cache->add_subcommand("verify", "check every entry; exit 1 if any is bad");
  verify->add_flag("--fix", args.fix, "remove the bad entries (user tier)");
  verify->add_flag("--remote", args.remote, remote_flag);
  CLI::App *prune = cache->add_subcommand("prune", "remove least recently used entries");
  prune->add_option("--max-size", args.max_size, "keep at most this much: 500M, 2G...");
  prune->add_option("--older-than", args.older_than, "remove entries unused for: 12h, 7d...");
  cache->add_subcommand("clear", "remove every entry of the user tier");
  cache
      ->add_subcommand("export",
                       "write the user tier's valid entries and tuning records to one archive")
      ->add_option("archive", args.archive, "the archive to write")
      ->required();
  cache
      ->add_subcommand(
          "import",
          "check an archive whole, then add its entries and tuning records to the user tier")
      ->add_option("archive", args.archive, "the archive to read")
      ->required();
  CLI::App *explain = cache->add_subcommand(
      "explain", "why a variant would compile: its key, each tier, the nearest entries' "
                 "differences");
  explain->add_option("template", args.explain.template_name, "a template from `kjit templates`")
      ->required();
  explain->add_option("-p,--param", args.explain.params, "NAME=VALUE, repeatable, in order");
  explain->add_option("--target", args.explain.target, "gfx90a, gfx90a:sramecc+:xnack-, sm_90...");
  explain->add_option("--sets", args.explain.sets_file,
                      "a set file: the template as it declares it");
  CLI::App *push = cache->add_subcommand(
      "push", "publish the valid local entries (those keys, else all) to every writable remote, "
              "never overwriting");
  CLI::App *pull = cache->add_subcommand(
      "pull", "copy remote entries (those keys, else all) into a local tier, each verified as a "
              "remote hit is");
  for (CLI::App *command : {push, pull}) {
    command->add_option("keys", args.keys, "keys (64 hex digits); none: every entry");
    command->add_option("--target", args.target,
                        "the target the keys were built for; without keys, only its entries");
    command->add_option("--tier", args.tier, "the local tier: user (default) or prebuilt");
  }
  for (CLI::App *command : cache->get_subcommands({}))
    command->add_flag("--json", as_json, "print one JSON document instead of a table");
  cache->add_flag("--json", as_json, "print one JSON document instead of a table");
  return cache;
}

int run_cache(const CLI::App &cache, const CacheArgs &args, bool as_json) {
  return run_cache_command(cache.get_subcommands().front()->get_name(), args, as_json, std::cout);
}

int run_cache_command(const std::string &command, const CacheArgs &args, bool as_json,
                      std::ostream &out) {
  if (uses_remotes(command, args)) {
    // These commands report every fault themselves (as the error, or a row of their output): at
    // the default level, the backend's once-per-process warnings would only say it twice.
    if (log().level() == spdlog::level::warn)
      log().set_level(spdlog::level::err);
    const Config config = Config::from_environment();
    if (command == "ls") {
      render(list_remote(config, canonical_target(args.target), args.limit), as_json, out);
      return exit_success;
    }
    if (command == "verify") {
      const VerifyReport report = verify_remote(config, args.fix);
      render(report, as_json, out);
      return found_problems(report.bad.empty());
    }
    if (command == "push") {
      const PushReport report = push(config, args);
      render(report, as_json, out);
      return found_problems(report.missing.empty());
    }
    const PullReport report = pull(config, args);
    render(report, as_json, out);
    return found_problems(report.rejected.empty() && report.missing.empty());
  }
  if (command == "ls") {
    render(list_local(args), as_json, out);
    return exit_success;
  }
  if (command == "stats") {
    render(gather_stats(), as_json, out);
    return exit_success;
  }
  if (command == "show") {
    const ShownEntry shown = show_entry(args.key_prefix);
    render(shown, as_json, out);
    if (args.disassemble) {
      if (!shown.entry)
        throw Error(Errc::cache_io, "cannot disassemble an invalid entry: " + shown.problem);
      return disassemble(*shown.entry);
    }
    return found_problems(shown.problem.empty());
  }
  if (command == "verify") {
    const VerifyReport report = verify_local(args.fix);
    render(report, as_json, out);
    return found_problems(report.bad.empty());
  }
  if (command == "explain")
    return run_explain(args.explain, as_json, out);
  if (command == "prune") {
    render(prune(args), as_json, out);
    return exit_success;
  }
  if (command == "clear") {
    render(cache::prune(*Tiers().user, 0, std::nullopt), as_json, out);
    return exit_success;
  }
  if (command == "export" || command == "import") {
    const Tiers tiers;
    const bool exported = command == "export";
    render(ArchiveReport{exported, args.archive,
                         exported ? export_cache_archive(*tiers.user, args.archive)
                                  : import_cache_archive(*tiers.user, args.archive)},
           as_json, out);
    return exit_success;
  }
  throw Error(Errc::bad_usage, "kjit cache " + command +
                                   ": no such command (ls, stats, show, verify, explain, prune, "
                                   "clear, export, import, push, pull)");
}

} // namespace kjit::cli

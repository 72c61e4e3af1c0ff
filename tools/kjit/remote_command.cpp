#include "remote_command.hpp"

#include "exit_status.hpp"
#include "json_output.hpp"
#include "table.hpp"

#include "kjit/cache/catalog.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/kjit.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/local_tiers.hpp"
#include "kjit/runtime/remotes.hpp"

#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

namespace kjit::cli {
namespace {

using nlohmann::json;

std::vector<cache::RemoteStorage> configured_remotes(const Config &config) {
  if (config.remote_urls.empty())
    throw Error(Errc::bad_config,
                "no remote cache: set KJIT_REMOTE_STORAGE (e.g. redis://host:6379; see README)");
  return open_remotes(config);
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

std::string subcommand_option(const CLI::App &cache, const char *command, const char *option) {
  const CLI::Option *given = cache.get_subcommand(command)->get_option(option);
  return given->count() > 0 ? given->as<std::string>() : "";
}

// ---- ls --remote ------------------------------------------------------------------------------

int run_ls(const Config &config, const std::string &target, std::size_t limit, bool as_json) {
  json remotes = json::array();
  Table table({"key", "target", "remote"});
  std::string summary;
  for (const cache::RemoteStorage &remote : configured_remotes(config)) {
    std::size_t count = 0;
    json shown = json::array();
    walk(remote, target, [&](const cache::RecordKey &record) {
      if (count++ >= limit)
        return;
      shown.push_back({{"key", record.key.hex()},
                       {"target", record.target},
                       {"name", cache::storage_name(record)}});
      table.add({record.key.hex().substr(0, 12), record.target, remote.description});
    });
    summary += remote.description + ": " + std::to_string(count) + " entries" +
               (count > limit ? " (" + std::to_string(limit) + " shown; --limit)" : "") + '\n';
    remotes.push_back({{"remote", remote.description}, {"entries", count}, {"shown", shown}});
  }
  if (as_json)
    print_json({{"remotes", remotes}});
  else {
    table.print(std::cout);
    std::cout << summary;
  }
  return 0;
}

// ---- verify --remote --------------------------------------------------------------------------

int run_verify(const Config &config, bool fix, bool as_json) {
  json bad = json::array();
  std::size_t checked = 0;
  Table table({"key", "target", "remote", "problem", "action"});
  for (const cache::RemoteStorage &remote : configured_remotes(config)) {
    std::vector<cache::RecordKey> records; // listed first: the walk holds the connection
    walk(remote, "", [&](const cache::RecordKey &record) { records.push_back(record); });
    for (const cache::RecordKey &record : records) {
      const std::optional<Checked> found = check(remote, record);
      if (!found)
        continue;
      ++checked;
      if (found->entry)
        continue;
      std::string action = "none";
      if (fix)
        action = remote.read_only ? "kept (read-only remote)"
                 : value_of(remote.backend->remove(record), remote, "removing a bad value")
                     ? "removed"
                     : "already gone";
      bad.push_back({{"key", record.key.hex()},
                     {"target", record.target},
                     {"name", cache::storage_name(record)},
                     {"remote", remote.description},
                     {"problem", found->problem},
                     {"action", action}});
      table.add({record.key.hex().substr(0, 12), record.target, remote.description, found->problem,
                 action});
    }
  }
  if (as_json)
    print_json({{"checked", checked}, {"bad", bad}});
  else {
    if (!bad.empty())
      table.print(std::cout);
    std::cout << checked << " remote values checked, " << bad.size() << " bad\n";
  }
  return bad.empty() ? 0 : exit_check_failed;
}

// The records KEY... --target name; nullopt when no key is given (every record, or only
// --target's).
std::optional<std::vector<cache::RecordKey>> named_records(const RemoteCacheArgs &args,
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

// ---- push -------------------------------------------------------------------------------------

int run_push(const Config &config, const RemoteCacheArgs &args, bool as_json) {
  check_tier_name(args.tier);
  const LocalTiers tiers(config);
  const cache::DiskStore *store = args.tier == "user"
                                      ? (tiers.user ? &*tiers.user : nullptr)
                                      : (tiers.prebuilt ? &*tiers.prebuilt : nullptr);
  if (!store)
    throw Error(Errc::bad_config,
                "no " + args.tier + " tier (" +
                    (args.tier == "user" ? config.cache_dir : config.prebuilt_dir).string() + ")");
  const std::vector<cache::RemoteStorage> configured = configured_remotes(config);
  std::vector<const cache::RemoteStorage *> writable;
  for (const cache::RemoteStorage &remote : configured)
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

  std::vector<std::pair<std::size_t, std::size_t>> outcomes(writable.size()); // stored, present
  std::size_t entries = 0, invalid = 0;
  json missing = json::array();
  for (const cache::RecordKey &record : records) {
    cache::Lookup found = store->read(record.key, record.target);
    if (found.status == cache::Lookup::Status::miss) {
      missing.push_back({{"key", record.key.hex()}, {"target", record.target}});
      continue;
    }
    if (found.status != cache::Lookup::Status::hit) {
      ++invalid;
      continue;
    }
    const std::vector<std::byte> bytes = cache::encode_entry(*found.entry);
    if (!cache::decode_record_entry(bytes, record).entry) { // what no remote reader would take
      ++invalid;
      continue;
    }
    ++entries;
    for (std::size_t i = 0; i < writable.size(); ++i)
      ++(value_of(writable[i]->backend->put(record, bytes, cache::PutMode::only_if_absent),
                  *writable[i],
                  "publishing " + cache::storage_name(record)) == cache::PutOutcome::stored
             ? outcomes[i].first
             : outcomes[i].second);
  }
  json remotes = json::array();
  for (std::size_t i = 0; i < writable.size(); ++i)
    remotes.push_back({{"remote", writable[i]->description},
                       {"stored", outcomes[i].first},
                       {"already_present", outcomes[i].second}});
  if (as_json)
    print_json({{"tier", args.tier},
                {"entries", entries},
                {"invalid", invalid},
                {"missing", missing},
                {"remotes", remotes}});
  else {
    std::cout << "pushed " << entries << " entries of the " << args.tier << " tier (" << invalid
              << " invalid, left out; " << missing.size() << " missing)\n";
    for (std::size_t i = 0; i < writable.size(); ++i)
      std::cout << "  " << writable[i]->description << ": " << outcomes[i].first << " stored, "
                << outcomes[i].second << " already present\n";
    for (const json &absent : missing)
      std::cout << "  missing  " << absent["key"].get<std::string>() << " ("
                << absent["target"].get<std::string>() << ")\n";
  }
  return missing.empty() ? 0 : exit_check_failed;
}

// ---- pull -------------------------------------------------------------------------------------

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

int run_pull(const Config &config, const RemoteCacheArgs &args, bool as_json) {
  const cache::DiskStore destination = pull_destination(config, args.tier);
  const std::vector<cache::RemoteStorage> remotes = configured_remotes(config);
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

  std::size_t pulled = 0, present = 0;
  json rejected = json::array(), missing = json::array();
  for (const cache::RecordKey &record : wanted) {
    if (destination.read(record.key, record.target).status == cache::Lookup::Status::hit) {
      ++present;
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
      ++pulled;
    else if (!problem.empty())
      rejected.push_back(
          {{"key", record.key.hex()}, {"target", record.target}, {"problem", problem}});
    else
      missing.push_back({{"key", record.key.hex()}, {"target", record.target}});
  }
  if (as_json)
    print_json({{"tier", args.tier},
                {"pulled", pulled},
                {"already_present", present},
                {"rejected", rejected},
                {"missing", missing}});
  else {
    std::cout << "pulled " << pulled << " entries into " << destination.root().string() << "; "
              << present << " already present, " << rejected.size() << " rejected, "
              << missing.size() << " missing\n";
    for (const json &bad : rejected)
      std::cout << "  rejected " << bad["key"].get<std::string>() << " ("
                << bad["target"].get<std::string>() << "): " << bad["problem"].get<std::string>()
                << '\n';
    for (const json &absent : missing)
      std::cout << "  missing  " << absent["key"].get<std::string>() << " ("
                << absent["target"].get<std::string>() << ")\n";
  }
  return rejected.empty() && missing.empty() ? 0 : exit_check_failed;
}

std::string given_command(const CLI::App &cache) {
  return cache.get_subcommands().front()->get_name();
}

} // namespace

void add_remote_cache_commands(CLI::App &cache, RemoteCacheArgs &args, bool &as_json) {
  for (const char *name : {"ls", "verify"})
    cache.get_subcommand(name)->add_flag(
        "--remote", args.remote, "the remotes of KJIT_REMOTE_STORAGE instead of the local tiers");
  cache.get_subcommand("ls")->add_option("--limit", args.limit,
                                         "with --remote: list at most this many (all are counted)");
  CLI::App *push = cache.add_subcommand(
      "push", "publish the valid local entries (those keys, else all) to every writable remote, "
              "never overwriting");
  CLI::App *pull = cache.add_subcommand(
      "pull", "copy remote entries (those keys, else all) into a local tier, each verified as a "
              "remote hit is");
  for (CLI::App *command : {push, pull}) {
    command->add_option("keys", args.keys, "keys (64 hex digits); none: every entry");
    command->add_option("--target", args.target,
                        "the target the keys were built for; without keys, only its entries");
    command->add_option("--tier", args.tier, "the local tier: user (default) or prebuilt");
    command->add_flag("--json", as_json, "print one JSON document instead of a table");
  }
}

bool is_remote_cache_command(const CLI::App &cache, const RemoteCacheArgs &args) {
  const std::string command = given_command(cache);
  return command == "push" || command == "pull" ||
         ((command == "ls" || command == "verify") && args.remote);
}

int run_remote_cache(const CLI::App &cache, const RemoteCacheArgs &args, bool as_json) {
  // These commands report every fault themselves (as the error, or a row of their output): at the
  // default level, the backend's once-per-process warnings would only say it twice.
  if (log().level() == spdlog::level::warn)
    log().set_level(spdlog::level::err);
  const Config config = Config::from_environment();
  const std::string command = given_command(cache);
  if (command == "ls")
    return run_ls(config, canonical_target(subcommand_option(cache, "ls", "--target")), args.limit,
                  as_json);
  if (command == "verify")
    return run_verify(config, cache.get_subcommand("verify")->get_option("--fix")->count() > 0,
                      as_json);
  if (command == "push")
    return run_push(config, args, as_json);
  return run_pull(config, args, as_json);
}

} // namespace kjit::cli

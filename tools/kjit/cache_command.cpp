#include "cache_command.hpp"

#include "exit_status.hpp"
#include "json_output.hpp"
#include "table.hpp"

#include "kjit/cache/archive.hpp"
#include "kjit/cache/catalog.hpp"
#include "kjit/cache/layout.hpp"
#include "kjit/cache/private_file.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/jit/kernel_resources.hpp"
#include "kjit/kjit.hpp"
#include "kjit/runtime/local_tiers.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/units.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <variant>

extern char **environ;

namespace kjit::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

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

// The entries of both tiers with their header summaries (only `target`'s when not empty).
struct ListedInTier {
  cache::ListedEntry listed;
  std::string tier;
};

std::vector<ListedInTier> list_summaries(const Tiers &tiers, const std::string &target) {
  std::vector<ListedInTier> all;
  for (auto [store, tier] : tiers.present())
    for (cache::ListedEntry &listed : cache::list(*store, target))
      all.push_back({std::move(listed), std::string(tier)});
  return all;
}

// "T=half N=4096", in the template's order.
std::string parameters_of(const std::vector<cache::EntryParameter> &parameters) {
  std::string out;
  for (const cache::EntryParameter &parameter : parameters)
    out += (out.empty() ? "" : " ") + parameter.name + "=" + parameter.value_text();
  return out;
}

// "42s ago", "5m ago", "3h ago", "12d ago".
std::string age(std::int64_t then_ns) {
  std::int64_t elapsed_ns = 0; // a saturated time before 1678 would overflow the difference
  if (__builtin_sub_overflow(cache::unix_now_ns(), then_ns, &elapsed_ns))
    elapsed_ns = std::numeric_limits<std::int64_t>::max();
  const std::int64_t seconds = std::max<std::int64_t>(0, elapsed_ns / 1000000000);
  char text[32];
  if (seconds < 120)
    std::snprintf(text, sizeof text, "%" PRId64 "s ago", seconds);
  else if (seconds < 7200)
    std::snprintf(text, sizeof text, "%" PRId64 "m ago", seconds / 60);
  else if (seconds < 2 * std::int64_t{86400})
    std::snprintf(text, sizeof text, "%" PRId64 "h ago", seconds / 3600);
  else
    std::snprintf(text, sizeof text, "%" PRId64 "d ago", seconds / 86400);
  return text;
}

// "2026-11-22T15:04:05Z"; a time whose year an int cannot hold (a crafted header) as its number.
std::string iso_time_of_seconds(std::int64_t unix_seconds) {
  const std::time_t seconds = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  if (::gmtime_r(&seconds, &utc) == nullptr)
    return std::to_string(unix_seconds) + " s after the epoch";
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string iso_time(std::int64_t unix_ns) { return iso_time_of_seconds(unix_ns / 1000000000); }

// ---- ls ---------------------------------------------------------------------------------------

int run_ls(const CacheArgs &args, bool as_json, std::ostream &out) {
  const Tiers tiers;
  const std::vector<ListedInTier> entries = list_summaries(tiers, args.target);
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (args.template_name.empty() ||
        (entries[i].listed.summary &&
         entries[i].listed.summary->template_name == args.template_name))
      order.push_back(i);
  static const std::string unknown_template;
  auto template_of = [&](std::size_t i) -> const std::string & {
    return entries[i].listed.summary ? entries[i].listed.summary->template_name : unknown_template;
  };
  auto stored = [&](std::size_t i) -> const cache::StoredEntry & {
    return entries[i].listed.stored;
  };
  std::function<bool(std::size_t, std::size_t)> before;
  if (args.sort == "recent")
    before = [&](std::size_t a, std::size_t b) {
      return stored(a).last_use_ns > stored(b).last_use_ns;
    };
  else if (args.sort == "size")
    before = [&](std::size_t a, std::size_t b) { return stored(a).bytes > stored(b).bytes; };
  else if (args.sort == "template")
    before = [&](std::size_t a, std::size_t b) {
      return std::forward_as_tuple(template_of(a), stored(a).target) <
             std::forward_as_tuple(template_of(b), stored(b).target);
    };
  else if (args.sort == "target")
    before = [&](std::size_t a, std::size_t b) {
      return std::forward_as_tuple(stored(a).target, template_of(a)) <
             std::forward_as_tuple(stored(b).target, template_of(b));
    };
  else
    throw Error(Errc::bad_usage,
                "--sort " + args.sort + ": expected recent, size, template or target");
  std::stable_sort(order.begin(), order.end(), before);

  if (as_json) {
    json rows = json::array();
    for (std::size_t i : order) {
      const cache::ListedEntry &listed = entries[i].listed;
      json row = {{"key", listed.stored.key.hex()},
                  {"tier", entries[i].tier},
                  {"target", listed.stored.target},
                  {"bytes", listed.stored.bytes},
                  {"last_use", iso_time(listed.stored.last_use_ns)},
                  {"path", listed.stored.path}};
      if (listed.summary) {
        row["template"] = listed.summary->template_name;
        row["parameters"] = parameters_of(listed.summary->parameters);
        row["kernels"] = listed.summary->kernels;
      } else {
        row["problem"] = listed.problem;
      }
      rows.push_back(std::move(row));
    }
    print_json(out, rows);
    return 0;
  }
  Table table({"key", "template", "parameters", "target", "size", "last use", "tier"});
  for (std::size_t i : order) {
    const cache::ListedEntry &listed = entries[i].listed;
    table.add(
        {listed.stored.key.hex().substr(0, 12),
         listed.summary ? listed.summary->template_name : "(unreadable: " + listed.problem + ")",
         listed.summary ? parameters_of(listed.summary->parameters) : "", listed.stored.target,
         human_bytes(listed.stored.bytes), age(listed.stored.last_use_ns), entries[i].tier});
  }
  table.print(out);
  return 0;
}

// ---- stats ------------------------------------------------------------------------------------

// Where a tier's files are (kjit/cache/layout.hpp), for scripts: they ask here, not spell "v2".
json layout_json(const cache::Layout &layout) {
  return {{"root", layout.root().string()},
          {"version_directory", layout.version_directory().string()},
          {"tuning_directory", layout.tuning_directory().string()},
          {"stats_directory", layout.stats_directory().string()},
          {"compilers_directory", layout.compilers_directory().string()}};
}

int run_stats(bool as_json, std::ostream &out) {
  const Tiers tiers;
  struct Totals {
    std::size_t entries = 0;
    std::uint64_t bytes = 0;
  };
  const std::vector<Listed> entries = list_entries(tiers);
  // Keyed by views into `entries`: no strings are built per entry.
  std::map<std::pair<std::string_view, std::string_view>, Totals> by_tier_target;
  for (const Listed &entry : entries) {
    Totals &totals = by_tier_target[{entry.tier, entry.stored.target}];
    ++totals.entries;
    totals.bytes += entry.stored.bytes;
  }
  const cache::CacheCounters counters =
      cache::StatsFiles(tiers.user->layout().stats_directory()).total();

  json prebuilt_path = json::array(); // the tiers searched before kjit's own
  for (const cache::DiskStore &store : tiers.prebuilt_path)
    prebuilt_path.push_back(store.root().string());
  if (as_json) {
    json rows = json::array();
    for (const auto &[where, totals] : by_tier_target)
      rows.push_back({{"tier", where.first},
                      {"target", where.second},
                      {"entries", totals.entries},
                      {"bytes", totals.bytes}});
    print_json(out, {{"cache_dir", tiers.config.cache_dir.string()},
                     {"prebuilt_dir", tiers.config.prebuilt_dir.string()},
                     {"prebuilt_path", prebuilt_path},
                     {"layout",
                      {{"version", cache::Layout::version_name()},
                       {"remote_entry_prefix", cache::storage_prefix(cache::kEntryRecord)},
                       {"user", layout_json(tiers.user->layout())},
                       {"prebuilt", layout_json(cache::Layout(tiers.config.prebuilt_dir))}}},
                     {"tiers", rows},
                     {"counters", json::parse(cache::to_json_text(counters))}});
    return 0;
  }
  out << "user tier     " << tiers.config.cache_dir.string() << '\n'
      << "prebuilt tier " << tiers.config.prebuilt_dir.string()
      << (tiers.prebuilt ? "" : " (absent)") << '\n';
  for (const cache::DiskStore &store : tiers.prebuilt_path)
    out << "searched first " << store.root().string() << '\n';
  out << '\n';
  Table table({"tier", "target", "entries", "size"});
  Totals all;
  for (const auto &[where, totals] : by_tier_target) {
    table.add({std::string(where.first), std::string(where.second), std::to_string(totals.entries),
               human_bytes(totals.bytes)});
    all.entries += totals.entries;
    all.bytes += totals.bytes;
  }
  table.add({"all", "", std::to_string(all.entries), human_bytes(all.bytes)});
  table.print(out);
  const std::uint64_t hits = counters.user_hits + counters.prebuilt_hits + counters.remote_hits;
  const std::uint64_t lookups = hits + counters.misses;
  std::printf(
      "\nhits            %" PRIu64 " (user %" PRIu64 ", prebuilt %" PRIu64 ", remote %" PRIu64
      ")%s\n"
      "misses          %" PRIu64 "\n"
      "remote          %" PRIu64 " misses, %" PRIu64 " errors, %" PRIu64 " timeouts\n"
      "compiles        %" PRIu64 ", %.1f s in the compiler\n"
      "time saved      %.1f s of compiling, by hits\n",
      hits, counters.user_hits, counters.prebuilt_hits, counters.remote_hits,
      lookups == 0 ? "" : (", " + std::to_string(100 * hits / lookups) + "% of lookups").c_str(),
      counters.misses, counters.remote_misses, counters.remote_errors, counters.remote_timeouts,
      counters.compiles, counters.compile_ms / 1000, counters.saved_ms / 1000);
  return 0;
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

// What the code object records about each kernel, by symbol; a field the code object does not
// record (spills in a cubin, AGPRs on RDNA) is null.
json resources_json(const std::vector<jit::KernelResources> &kernels) {
  auto optional = [](const auto &value) { return value ? json(*value) : json(nullptr); };
  json out = json::object();
  for (const jit::KernelResources &kernel : kernels)
    out[kernel.symbol] = {{"registers", kernel.registers},
                          {"agprs", optional(kernel.agprs)},
                          {"sgprs", optional(kernel.sgprs)},
                          {"shared_bytes", kernel.shared_bytes},
                          {"scratch_bytes", kernel.scratch_bytes},
                          {"spills", optional(kernel.spills)},
                          {"wavefront_size", optional(kernel.wavefront_size)},
                          {"max_workgroup_size", optional(kernel.max_workgroup_size)}};
  return out;
}

void print_resources(const std::vector<jit::KernelResources> &kernels, std::ostream &out) {
  auto optional = [](const auto &value) { return value ? std::to_string(*value) : "-"; };
  Table table({"kernel", "registers", "agprs", "sgprs", "shared", "scratch", "spills", "wave"});
  for (const jit::KernelResources &kernel : kernels)
    table.add({kernel.symbol, std::to_string(kernel.registers), optional(kernel.agprs),
               optional(kernel.sgprs), std::to_string(kernel.shared_bytes),
               std::to_string(kernel.scratch_bytes), optional(kernel.spills),
               optional(kernel.wavefront_size)});
  table.print(out);
}

int run_show(const CacheArgs &args, bool as_json, std::ostream &out) {
  const Tiers tiers;
  const std::vector<Listed> entries = list_entries(tiers);
  const Listed &chosen = find_by_prefix(entries, args.key_prefix);
  const std::string problem = cache::verify(*chosen.store, chosen.stored);
  cache::Lookup lookup = chosen.store->read(chosen.stored.key, chosen.stored.target);
  std::string header_problem;
  const std::optional<cache::EntryHeader> header =
      lookup.entry ? lookup.entry->header : cache::read_header(chosen.stored.path, header_problem);

  if (as_json) {
    json shown = {{"key", chosen.stored.key.hex()},
                  {"tier", chosen.tier},
                  {"path", chosen.stored.path},
                  {"bytes", chosen.stored.bytes},
                  {"last_use", iso_time(chosen.stored.last_use_ns)},
                  {"valid", problem.empty()}};
    if (!problem.empty())
      shown["problem"] = problem;
    if (header) {
      shown["template"] = header->template_name;
      shown["parameters"] = json::object();
      for (const cache::EntryParameter &parameter : header->parameters)
        std::visit([&](const auto &value) { shown["parameters"][parameter.name] = value; },
                   parameter.value);
      shown["target"] = header->target;
      shown["compiler"] = header->compiler;
      shown["created"] = iso_time_of_seconds(header->created_unix);
      shown["compile_ms"] = header->compile_ms;
      shown["kernels"] = header->kernels;
      shown["key_inputs"] = header->key_inputs;
    }
    if (lookup.entry) {
      shown["code_bytes"] = lookup.entry->code.size();
      if (const auto resources = jit::read_kernel_resources(lookup.entry->code))
        shown["resources"] = resources_json(*resources);
    }
    print_json(out, shown);
  } else {
    out << "key        " << chosen.stored.key.hex() << '\n'
        << "tier       " << chosen.tier << '\n'
        << "path       " << chosen.stored.path << '\n'
        << "size       " << human_bytes(chosen.stored.bytes) << '\n'
        << "last use   " << iso_time(chosen.stored.last_use_ns) << " ("
        << age(chosen.stored.last_use_ns) << ")\n"
        << "valid      " << (problem.empty() ? "yes" : "no: " + problem) << '\n';
    if (header) {
      out << "template   " << header->template_name << '\n'
          << "parameters " << parameters_of(header->parameters) << '\n'
          << "target     " << header->target << '\n'
          << "compiler   " << header->compiler << '\n'
          << "created    " << iso_time_of_seconds(header->created_unix) << '\n'
          << "compile    " << header->compile_ms << " ms\n";
      if (lookup.entry)
        out << "code       " << lookup.entry->code.size() << " bytes\n";
      out << "kernels\n";
      for (const auto &[expression, lowered] : header->kernels)
        out << "  " << expression << "  ->  " << lowered << '\n';
      if (lookup.entry)
        if (const auto resources = jit::read_kernel_resources(lookup.entry->code)) {
          out << "resources (shared and scratch in bytes)\n";
          print_resources(*resources, out);
        }
      out << "key inputs\n";
      for (const auto &[name, value] : header->key_inputs)
        out << "  " << name << " = " << value << '\n';
    } else {
      out << "header     unreadable: " << header_problem << '\n';
    }
  }
  if (args.disassemble) {
    if (!lookup.entry)
      throw Error(Errc::cache_io, "cannot disassemble an invalid entry: " + problem);
    return disassemble(*lookup.entry);
  }
  return problem.empty() ? 0 : exit_check_failed;
}

// ---- verify, prune, clear
// ------------------------------------------------------------------------

int run_verify(const CacheArgs &args, bool as_json, std::ostream &out) {
  const Tiers tiers;
  const std::vector<Listed> entries = list_entries(tiers);
  json bad = json::array();
  Table table({"key", "tier", "problem", "action"});
  for (const Listed &entry : entries) {
    const std::string problem = cache::verify(*entry.store, entry.stored);
    if (problem.empty())
      continue;
    std::string action = "none";
    if (args.fix) {
      if (entry.store->access() == cache::Access::read_only)
        action = "kept (read-only tier)";
      else if (std::string refused = entry.store->remove(entry.stored.key, entry.stored.target);
               refused.empty())
        action = "removed";
      else
        action = "kept: " + refused;
    }
    bad.push_back({{"key", entry.stored.key.hex()},
                   {"tier", entry.tier},
                   {"path", entry.stored.path},
                   {"problem", problem},
                   {"action", action}});
    table.add({entry.stored.key.hex().substr(0, 12), entry.tier, problem, action});
  }
  if (as_json)
    print_json(out, {{"checked", entries.size()}, {"bad", bad}});
  else {
    if (!bad.empty())
      table.print(out);
    out << entries.size() << " entries checked, " << bad.size() << " bad\n";
  }
  return bad.empty() ? 0 : exit_check_failed;
}

int print_pruned(const cache::PruneResult &result, bool as_json, std::ostream &out) {
  if (as_json)
    print_json(out, {{"removed", result.removed},
                     {"removed_bytes", result.removed_bytes},
                     {"kept", result.kept},
                     {"kept_bytes", result.kept_bytes}});
  else
    out << "removed " << result.removed << " entries (" << human_bytes(result.removed_bytes)
        << "), kept " << result.kept << " (" << human_bytes(result.kept_bytes) << ")\n";
  return 0;
}

int run_prune(const CacheArgs &args, bool as_json, std::ostream &out) {
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
  return print_pruned(cache::prune(*tiers.user, max_bytes, unused_since_ns), as_json, out);
}

int print_archive(const std::string &done, const std::string &archive,
                  const cache::ArchiveSummary &summary, const char *skipped_as, bool as_json,
                  std::ostream &out) {
  if (as_json)
    print_json(out, {{"archive", archive},
                     {"entries", summary.entries},
                     {"bytes", summary.bytes},
                     {"skipped", summary.skipped},
                     {"tuning_records", summary.records}});
  else
    out << done << " " << summary.entries << " entries (" << human_bytes(summary.bytes) << ") and "
        << summary.records << " tuning records " << (done == "exported" ? "to " : "from ")
        << archive << "; " << summary.skipped << " " << skipped_as << '\n';
  return 0;
}

int run_clear(bool as_json, std::ostream &out) {
  const Tiers tiers;
  return print_pruned(cache::prune(*tiers.user, 0, std::nullopt), as_json, out);
}

} // namespace

CLI::App *add_cache_command(CLI::App &app, CacheArgs &args, bool &as_json) {
  CLI::App *cache = app.add_subcommand("cache", "inspect and manage the cache");
  cache->require_subcommand(1);
  CLI::App *ls = cache->add_subcommand("ls", "list entries of both tiers");
  ls->add_option("--target", args.target, "only entries for this target id");
  ls->add_option("--template", args.template_name, "only entries of this template");
  ls->add_option("--sort", args.sort, "recent (default), size, template or target");
  cache->add_subcommand("stats", "entries and bytes per tier and target; hits, misses, compiles");
  CLI::App *show = cache->add_subcommand("show", "one entry: header, key inputs, kernels");
  show->add_option("key", args.key_prefix, "the key or a unique prefix of it")->required();
  show->add_flag("--disassemble", args.disassemble, "disassemble the code object");
  CLI::App *verify = cache->add_subcommand("verify", "check every entry; exit 1 if any is bad");
  verify->add_flag("--fix", args.fix, "remove the bad entries (user tier)");
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
  if (command == "ls")
    return run_ls(args, as_json, out);
  if (command == "stats")
    return run_stats(as_json, out);
  if (command == "show")
    return run_show(args, as_json, out);
  if (command == "verify")
    return run_verify(args, as_json, out);
  if (command == "explain")
    return run_explain(args.explain, as_json);
  if (command == "prune")
    return run_prune(args, as_json, out);
  if (command == "export") {
    const Tiers tiers;
    return print_archive("exported", args.archive, export_cache_archive(*tiers.user, args.archive),
                         "invalid, left out", as_json, out);
  }
  if (command == "import") {
    const Tiers tiers;
    return print_archive("imported", args.archive, import_cache_archive(*tiers.user, args.archive),
                         "already present", as_json, out);
  }
  if (command == "clear")
    return run_clear(as_json, out);
  throw Error(Errc::bad_usage, "kjit cache " + command +
                                   ": no such command (ls, stats, show, verify, prune, clear, "
                                   "export, import)");
}

} // namespace kjit::cli

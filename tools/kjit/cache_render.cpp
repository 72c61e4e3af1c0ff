// The renderings of the `kjit cache` commands' results (cache_reports.hpp): each a JSON document
// and a table, from the result alone.
#include "cache_reports.hpp"
#include "table.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/units.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <limits>
#include <variant>

namespace kjit::cli {
namespace {

using nlohmann::json;

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

std::string short_key(const cache::Key &key) { return key.hex().substr(0, 12); }

json record_json(const cache::RecordKey &record) {
  return {{"key", record.key.hex()}, {"target", record.target}};
}

// push's and pull's keys that no tier or remote holds.
json missing_json(const std::vector<cache::RecordKey> &missing) {
  json rows = json::array();
  for (const cache::RecordKey &record : missing)
    rows.push_back(record_json(record));
  return rows;
}

void print_missing(const std::vector<cache::RecordKey> &missing, std::ostream &out) {
  for (const cache::RecordKey &record : missing)
    out << "  missing  " << record.key.hex() << " (" << record.target << ")\n";
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

} // namespace

// ---- ls ---------------------------------------------------------------------------------------

json to_json(const LocalListing &listing) {
  json rows = json::array();
  for (std::size_t i : listing.order) {
    const cache::ListedEntry &listed = listing.entries[i].listed;
    json row = {{"key", listed.stored.key.hex()},
                {"tier", listing.entries[i].tier},
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
  return rows;
}

void print_table(const LocalListing &listing, std::ostream &out) {
  Table table({"key", "template", "parameters", "target", "size", "last use", "tier"});
  for (std::size_t i : listing.order) {
    const cache::ListedEntry &listed = listing.entries[i].listed;
    table.add(
        {short_key(listed.stored.key),
         listed.summary ? listed.summary->template_name : "(unreadable: " + listed.problem + ")",
         listed.summary ? parameters_of(listed.summary->parameters) : "", listed.stored.target,
         human_bytes(listed.stored.bytes), age(listed.stored.last_use_ns),
         listing.entries[i].tier});
  }
  table.print(out);
}

json to_json(const RemoteListing &listing) {
  json remotes = json::array();
  for (const RemoteListing::Remote &remote : listing.remotes) {
    json shown = json::array();
    for (const cache::RecordKey &record : remote.shown) {
      json row = record_json(record);
      row["name"] = cache::storage_name(record);
      shown.push_back(std::move(row));
    }
    remotes.push_back(
        {{"remote", remote.description}, {"entries", remote.entries}, {"shown", shown}});
  }
  return {{"remotes", remotes}};
}

void print_table(const RemoteListing &listing, std::ostream &out) {
  Table table({"key", "target", "remote"});
  for (const RemoteListing::Remote &remote : listing.remotes)
    for (const cache::RecordKey &record : remote.shown)
      table.add({short_key(record.key), record.target, remote.description});
  table.print(out);
  for (const RemoteListing::Remote &remote : listing.remotes)
    out << remote.description << ": " << remote.entries << " entries"
        << (remote.entries > listing.limit
                ? " (" + std::to_string(listing.limit) + " shown; --limit)"
                : "")
        << '\n';
}

// ---- stats ------------------------------------------------------------------------------------

json to_json(const CacheStats &stats) {
  json rows = json::array();
  for (const TierTotals &totals : stats.tiers)
    rows.push_back({{"tier", totals.tier},
                    {"target", totals.target},
                    {"entries", totals.entries},
                    {"bytes", totals.bytes}});
  return {{"cache_dir", stats.cache_dir},
          {"prebuilt_dir", stats.prebuilt_dir},
          {"prebuilt_path", stats.prebuilt_path},
          {"tiers", rows},
          {"counters", json::parse(cache::to_json_text(stats.counters))}};
}

void print_table(const CacheStats &stats, std::ostream &out) {
  out << "user tier     " << stats.cache_dir << '\n'
      << "prebuilt tier " << stats.prebuilt_dir << (stats.prebuilt_present ? "" : " (absent)")
      << '\n';
  for (const std::string &root : stats.prebuilt_path)
    out << "searched first " << root << '\n';
  out << '\n';
  Table table({"tier", "target", "entries", "size"});
  TierTotals all;
  for (const TierTotals &totals : stats.tiers) {
    table.add(
        {totals.tier, totals.target, std::to_string(totals.entries), human_bytes(totals.bytes)});
    all.entries += totals.entries;
    all.bytes += totals.bytes;
  }
  table.add({"all", "", std::to_string(all.entries), human_bytes(all.bytes)});
  table.print(out);
  const cache::CacheCounters &counters = stats.counters;
  const std::uint64_t hits = counters.user_hits + counters.prebuilt_hits + counters.remote_hits;
  const std::uint64_t lookups = hits + counters.misses;
  char text[512];
  std::snprintf(
      text, sizeof text,
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
  out << text;
}

// ---- show -------------------------------------------------------------------------------------

json to_json(const ShownEntry &shown) {
  json document = {{"key", shown.stored.key.hex()},
                   {"tier", shown.tier},
                   {"path", shown.stored.path},
                   {"bytes", shown.stored.bytes},
                   {"last_use", iso_time(shown.stored.last_use_ns)},
                   {"valid", shown.problem.empty()}};
  if (!shown.problem.empty())
    document["problem"] = shown.problem;
  if (const std::optional<cache::EntryHeader> &header = shown.header) {
    document["template"] = header->template_name;
    document["parameters"] = json::object();
    for (const cache::EntryParameter &parameter : header->parameters)
      std::visit([&](const auto &value) { document["parameters"][parameter.name] = value; },
                 parameter.value);
    document["target"] = header->target;
    document["compiler"] = header->compiler;
    document["created"] = iso_time_of_seconds(header->created_unix);
    document["compile_ms"] = header->compile_ms;
    document["kernels"] = header->kernels;
    document["key_inputs"] = header->key_inputs;
  }
  if (shown.entry) {
    document["code_bytes"] = shown.entry->code.size();
    if (shown.resources)
      document["resources"] = resources_json(*shown.resources);
  }
  return document;
}

void print_table(const ShownEntry &shown, std::ostream &out) {
  out << "key        " << shown.stored.key.hex() << '\n'
      << "tier       " << shown.tier << '\n'
      << "path       " << shown.stored.path << '\n'
      << "size       " << human_bytes(shown.stored.bytes) << '\n'
      << "last use   " << iso_time(shown.stored.last_use_ns) << " ("
      << age(shown.stored.last_use_ns) << ")\n"
      << "valid      " << (shown.problem.empty() ? "yes" : "no: " + shown.problem) << '\n';
  const std::optional<cache::EntryHeader> &header = shown.header;
  if (!header) {
    out << "header     unreadable: " << shown.header_problem << '\n';
    return;
  }
  out << "template   " << header->template_name << '\n'
      << "parameters " << parameters_of(header->parameters) << '\n'
      << "target     " << header->target << '\n'
      << "compiler   " << header->compiler << '\n'
      << "created    " << iso_time_of_seconds(header->created_unix) << '\n'
      << "compile    " << header->compile_ms << " ms\n";
  if (shown.entry)
    out << "code       " << shown.entry->code.size() << " bytes\n";
  out << "kernels\n";
  for (const auto &[expression, lowered] : header->kernels)
    out << "  " << expression << "  ->  " << lowered << '\n';
  if (shown.entry && shown.resources) {
    out << "resources (shared and scratch in bytes)\n";
    print_resources(*shown.resources, out);
  }
  out << "key inputs\n";
  for (const auto &[name, value] : header->key_inputs)
    out << "  " << name << " = " << value << '\n';
}

// ---- verify -----------------------------------------------------------------------------------

json to_json(const VerifyReport &report) {
  json bad = json::array();
  for (const BadValue &value : report.bad)
    if (report.remote)
      bad.push_back({{"key", value.key},
                     {"target", value.target},
                     {"name", value.location},
                     {"remote", value.holder},
                     {"problem", value.problem},
                     {"action", value.action}});
    else
      bad.push_back({{"key", value.key},
                     {"tier", value.holder},
                     {"path", value.location},
                     {"problem", value.problem},
                     {"action", value.action}});
  return {{"checked", report.checked}, {"bad", bad}};
}

void print_table(const VerifyReport &report, std::ostream &out) {
  Table table = report.remote ? Table({"key", "target", "remote", "problem", "action"})
                              : Table({"key", "tier", "problem", "action"});
  for (const BadValue &value : report.bad)
    if (report.remote)
      table.add({value.key.substr(0, 12), value.target, value.holder, value.problem, value.action});
    else
      table.add({value.key.substr(0, 12), value.holder, value.problem, value.action});
  if (!report.bad.empty())
    table.print(out);
  out << report.checked << (report.remote ? " remote values" : " entries") << " checked, "
      << report.bad.size() << " bad\n";
}

// ---- prune, clear -----------------------------------------------------------------------------

json to_json(const cache::PruneResult &pruned) {
  return {{"removed", pruned.removed},
          {"removed_bytes", pruned.removed_bytes},
          {"kept", pruned.kept},
          {"kept_bytes", pruned.kept_bytes}};
}

void print_table(const cache::PruneResult &pruned, std::ostream &out) {
  out << "removed " << pruned.removed << " entries (" << human_bytes(pruned.removed_bytes)
      << "), kept " << pruned.kept << " (" << human_bytes(pruned.kept_bytes) << ")\n";
}

// ---- export, import ---------------------------------------------------------------------------

json to_json(const ArchiveReport &report) {
  return {{"archive", report.archive},
          {"entries", report.summary.entries},
          {"bytes", report.summary.bytes},
          {"skipped", report.summary.skipped},
          {"tuning_records", report.summary.records}};
}

void print_table(const ArchiveReport &report, std::ostream &out) {
  const cache::ArchiveSummary &summary = report.summary;
  out << (report.exported ? "exported " : "imported ") << summary.entries << " entries ("
      << human_bytes(summary.bytes) << ") and " << summary.records << " tuning records "
      << (report.exported ? "to " : "from ") << report.archive << "; " << summary.skipped << " "
      << (report.exported ? "invalid, left out" : "already present") << '\n';
}

// ---- push, pull -------------------------------------------------------------------------------

json to_json(const PushReport &report) {
  json remotes = json::array();
  for (const PushReport::Remote &remote : report.remotes)
    remotes.push_back({{"remote", remote.description},
                       {"stored", remote.stored},
                       {"already_present", remote.already_present}});
  return {{"tier", report.tier},
          {"entries", report.entries},
          {"invalid", report.invalid},
          {"missing", missing_json(report.missing)},
          {"remotes", remotes}};
}

void print_table(const PushReport &report, std::ostream &out) {
  out << "pushed " << report.entries << " entries of the " << report.tier << " tier ("
      << report.invalid << " invalid, left out; " << report.missing.size() << " missing)\n";
  for (const PushReport::Remote &remote : report.remotes)
    out << "  " << remote.description << ": " << remote.stored << " stored, "
        << remote.already_present << " already present\n";
  print_missing(report.missing, out);
}

json to_json(const PullReport &report) {
  json rejected = json::array();
  for (const PullReport::Rejected &bad : report.rejected) {
    json row = record_json(bad.record);
    row["problem"] = bad.problem;
    rejected.push_back(std::move(row));
  }
  return {{"tier", report.tier},
          {"pulled", report.pulled},
          {"already_present", report.already_present},
          {"rejected", rejected},
          {"missing", missing_json(report.missing)}};
}

void print_table(const PullReport &report, std::ostream &out) {
  out << "pulled " << report.pulled << " entries into " << report.destination << "; "
      << report.already_present << " already present, " << report.rejected.size() << " rejected, "
      << report.missing.size() << " missing\n";
  for (const PullReport::Rejected &bad : report.rejected)
    out << "  rejected " << bad.record.key.hex() << " (" << bad.record.target
        << "): " << bad.problem << '\n';
  print_missing(report.missing, out);
}

} // namespace kjit::cli

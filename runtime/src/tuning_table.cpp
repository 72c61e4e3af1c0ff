#include "kjit/runtime/tuning_table.hpp"

#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/layout.hpp"
#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/remotes.hpp"
#include "kjit/templates/library.hpp"
#include "kjit/text.hpp"
#include "record_store.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>

namespace kjit {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kRecordFormat = 1;

json params_json(const ParamValues &params) {
  json out = json::object();
  for (const auto &[name, value] : params)
    out[name] = value.is_integer() ? json(value.integer()) : json(value.type());
  return out;
}

ParamValues params_of(const json &object) {
  if (!object.is_object())
    throw json::type_error::create(302, "parameters must be an object", &object);
  ParamValues params;
  for (const auto &[name, value] : object.items())
    params.add(name, value.is_number_integer() ? Value(value.get<std::int64_t>())
                                               : Value(value.get<std::string>()));
  return params.sorted();
}

json timed_json(const TimedVariant &timed) {
  return {{"params", params_json(timed.params)}, {"time_us", timed.time_us}};
}

TimedVariant timed_of(const json &object) {
  return {params_of(object.at("params")), object.at("time_us").get<double>()};
}

json record_json(const TuningRecord &record) {
  json runners = json::array();
  for (const TimedVariant &runner : record.runners_up)
    runners.push_back(timed_json(runner));
  const TuningKey &key = record.key;
  return {{"format", kRecordFormat},
          {"key", key.key().hex()},
          {"template", key.template_name},
          {"source_digest", key.source_digest},
          {"problem", params_json(key.problem)},
          {"extents", params_json(key.extents)},
          {"target", key.device.target},
          {"compute_units", key.device.compute_units},
          {"device", key.device.name},
          {"compiler", key.compiler},
          {"winner", timed_json(record.winner)},
          {"runners_up", runners},
          {"created_unix", record.created_unix}};
}

// An integer field of a record: a JSON integer within T's range. nlohmann's get<T>() would convert
// a number like 1e300 too, which is undefined behaviour beyond T's range.
template <typename T> T integer_of(const json &object, const char *name) {
  const json &value = object.at(name);
  const bool fits =
      value.is_number_unsigned()
          ? value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max())
          : value.is_number_integer() &&
                value.get<std::int64_t>() >= std::numeric_limits<T>::min() &&
                value.get<std::int64_t>() <= std::numeric_limits<T>::max();
  if (!fits)
    throw Error(Errc::cache_io, std::string("\"") + name + "\" is " + value.dump() +
                                    ", not an integer from " +
                                    std::to_string(std::numeric_limits<T>::min()) + " to " +
                                    std::to_string(std::numeric_limits<T>::max()));
  return static_cast<T>(value.get<std::int64_t>());
}

TuningRecord record_of(const json &object) {
  if (integer_of<int>(object, "format") != kRecordFormat)
    throw Error(Errc::cache_io, "tuning record format " + object.at("format").dump() +
                                    ", this kjit reads " + std::to_string(kRecordFormat));
  TuningRecord record;
  TuningKey &key = record.key;
  key.template_name = object.at("template").get<std::string>();
  key.source_digest = object.at("source_digest").get<std::string>();
  key.problem = params_of(object.at("problem"));
  key.extents = params_of(object.at("extents"));
  key.device = {object.at("target").get<std::string>(), integer_of<int>(object, "compute_units"),
                object.at("device").get<std::string>()};
  key.compiler = object.at("compiler").get<std::string>();
  record.winner = timed_of(object.at("winner"));
  for (const json &runner : object.at("runners_up"))
    record.runners_up.push_back(timed_of(runner));
  record.created_unix = integer_of<std::int64_t>(object, "created_unix");
  if (object.at("key").get<std::string>() != key.key().hex())
    throw Error(Errc::cache_io, "its key " + object.at("key").get<std::string>() +
                                    " is not the key of its content, " + key.key().hex());
  return record;
}

// The tier at `root`'s tuning directory (cache/layout.hpp); empty for no tier.
fs::path tuning_directory(const fs::path &root) {
  return root.empty() ? fs::path() : cache::Layout(root).tuning_directory();
}

// The record's file in a tuning directory. Throws Error(bad_target) for a target id that cannot
// name a directory (the same rule as entries').
fs::path record_path(const fs::path &directory, const TuningKey &key) {
  return directory / cache::Layout::tuning_record_name(key.key(), key.device.target);
}

// Warns once per file and process: a table read on every new shape must not repeat itself.
void warn_once(const fs::path &path, const std::string &problem) {
  if (first_warning_about("tuning record " + path.string()))
    log().warn("ignoring tuning record {}: {}", path.string(), problem);
}

// The record in the file at `path`, or nullopt (with one warning) when it is not a valid one.
std::optional<TuningRecord> read_record(const fs::path &path) {
  const cache::PrivateFile file = cache::read_private_file(path);
  if (file.missing)
    return std::nullopt;
  if (!file.problem.empty()) {
    warn_once(path, file.problem);
    return std::nullopt;
  }
  try {
    return TuningRecord::from_json(
        std::string_view(reinterpret_cast<const char *>(file.bytes.data()), file.bytes.size()));
  } catch (const Error &error) {
    warn_once(path, error.summary());
  }
  return std::nullopt;
}

// Why a record found for another key is not used.
std::string not_the_key_asked_for(const TuningKey &found) {
  return "it is for " + found.template_name + " (" + found.problem.to_string() + "; " +
         found.extents.to_string() + ") on " + found.device.target + " with " +
         std::to_string(found.device.compute_units) + " compute units, compiled by " +
         found.compiler + ", not the problem and device asked for";
}

// Tuning records in a remote are a kind of their own, so that they never meet entries, versioned
// by the records' format.
constexpr cache::RecordKind kRemoteTuningRecord{"tuning", kRecordFormat};

cache::RecordKey remote_record(const TuningKey &key) {
  return {kRemoteTuningRecord, key.device.target, key.key()};
}

} // namespace

std::optional<Stored<TuningRecord>> TuningKind::read(const Tier &directory, const TuningKey &key,
                                                     Origin origin, Reading) const {
  try {
    const fs::path path = record_path(directory, key);
    std::optional<TuningRecord> record = read_record(path);
    if (record && record->key != key) {
      warn_once(path, not_the_key_asked_for(record->key));
      return std::nullopt;
    }
    if (!record)
      return std::nullopt;
    return Stored<TuningRecord>{std::move(*record), origin, path};
  } catch (const Error &error) { // a target id that cannot name a directory: no record
    log().debug("tuning table: {}", error.summary());
    return std::nullopt;
  }
}

fs::path TuningKind::write(const Tier &directory, const TuningRecord &record) const {
  const fs::path path = record_path(directory, record.key);
  cache::publish_private_file(path, encode(record), path.stem().string(), "tuning record");
  return path;
}

std::optional<cache::FileLock> TuningKind::lock(const Tier &directory, const TuningKey &key,
                                                FleetWait wait) const {
  if (const std::string problem = cache::make_private_directories(directory); !problem.empty())
    throw Error(Errc::cache_io, "cannot create " + directory.string() + ": " + problem);
  return cache::FileLock::try_for(directory / cache::Layout::kLockFileName, key.key(), wait.wait,
                                  wait.poll);
}

cache::RecordKey TuningKind::remote_key(const TuningKey &key) const { return remote_record(key); }

cache::RecordKey TuningKind::remote_key_of(const TuningRecord &record) const {
  return remote_record(record.key);
}

std::string TuningKind::decode(const TuningKey &key, std::span<const std::byte> value,
                               std::optional<TuningRecord> &out) const {
  try {
    TuningRecord record = TuningRecord::from_json(
        std::string_view(reinterpret_cast<const char *>(value.data()), value.size()));
    if (record.key != key)
      return not_the_key_asked_for(record.key);
    out = std::move(record);
    return {};
  } catch (const Error &error) {
    return error.summary();
  }
}

std::vector<std::byte> TuningKind::encode(const TuningRecord &record) const {
  const std::string text = record.to_json();
  const auto bytes = std::as_bytes(std::span(text));
  return {bytes.begin(), bytes.end()};
}

namespace {

void list_in(const fs::path &directory, std::vector<TuningRecord> &out) {
  std::error_code error;
  if (directory.empty() || !fs::is_directory(directory, error))
    return;
  std::vector<fs::path> files;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error))
    if (it.depth() == 1 && it->path().extension() == ".json")
      files.push_back(it->path());
  std::sort(files.begin(), files.end());
  for (const fs::path &path : files) {
    std::optional<TuningRecord> record = read_record(path);
    if (record && record_path(directory, record->key) != path) {
      warn_once(path, "it is filed under another key than its content's");
      continue;
    }
    if (record)
      out.push_back(std::move(*record));
  }
}

Error refused_record(const std::string &origin, std::size_t index, const std::string &problem) {
  return Error(Errc::bad_archive, origin + ": record " + std::to_string(index) + ": " + problem +
                                      "; nothing was imported");
}

// Checks a record to be imported as the untrusted input it is; throws Error naming the problem.
// Its target must name a directory, and its winner bind to its template where that is a built-in
// one of the same source. A record of another version of a template, or of one kjit does not
// ship, cannot be checked here; it is never found for a template it does not match, and the
// operators check a winner again before they launch it.
void check_importable(const TuningRecord &record) {
  record_path(".", record.key); // Error(bad_target) for a target that cannot name a directory
  for (const Template &tmpl : templates::builtin())
    if (tmpl.name() == record.key.template_name &&
        tuning_source_digest(tmpl) == record.key.source_digest)
      if (const std::string problem = winner_problem(tmpl, record); !problem.empty())
        throw Error(Errc::bad_parameter, problem);
}

// "1 entry", "3 entries".
std::string counted(std::size_t count, const std::string &one, const std::string &more) {
  return std::to_string(count) + " " + (count == 1 ? one : more);
}

// The keys of `records[from, to)` as `kjit tune ls` shows them (12 hex digits), comma-separated.
std::string short_keys(const std::vector<TuningRecord> &records, std::size_t from, std::size_t to) {
  return join(std::span(records).subspan(from, to - from), ", ",
              [](const TuningRecord &record) { return record.key.key().hex().substr(0, 12); });
}

// Which entries of `content` an import into `store` that stopped did not leave there, as archive
// positions ("entries 4-10"), for the one line that reports the stop.
std::string entries_left_out(const cache::DiskStore &store, const cache::ArchiveContent &content,
                             std::size_t records) {
  const std::size_t count = content.entries;
  std::vector<bool> missing(count);
  try {
    const std::vector<bool> present = cache::entries_present(store, content);
    for (std::size_t i = 0; i < count; ++i)
      missing[i] = i >= present.size() || !present[i];
  } catch (const Error &unreadable) {
    return "the import stopped, and which of its " + counted(count, "entry", "entries") +
           " it left out is unknown: " + unreadable.summary();
  }
  std::string positions; // runs of missing entries, counted from 1: "2, 4-10"
  for (std::size_t first = 0; first < count; ++first) {
    if (!missing[first])
      continue;
    std::size_t last = first;
    while (last + 1 < count && missing[last + 1])
      ++last;
    positions += (positions.empty() ? "" : ", ") + std::to_string(first + 1) +
                 (last > first ? "-" + std::to_string(last + 1) : std::string());
    first = last;
  }
  const auto left_out = static_cast<std::size_t>(std::count(missing.begin(), missing.end(), true));
  return "the import stopped with " + std::to_string(count - left_out) + " of its " +
         counted(count, "entry", "entries") + " in the cache; not imported: " +
         (left_out == 0 ? std::string("no entry") : "entries " + positions) + " and its " +
         counted(records, "tuning record", "tuning records") +
         " (importing it again skips the entries already there)";
}

} // namespace

bool TuningKey::operator==(const TuningKey &other) const { return fields() == other.fields(); }

bool TimedVariant::operator==(const TimedVariant &other) const {
  return time_us == other.time_us && params == other.params;
}

TuningKey TuningKey::of(const Template &tmpl, const ParamValues &problem,
                        const ParamValues &extents, TuningDevice device, std::string compiler) {
  for (const auto &[name, value] : problem) {
    const ParamDecl *decl = tmpl.param(name);
    if (decl == nullptr)
      throw Error(Errc::bad_parameter,
                  tmpl.name() + ": unknown parameter '" + name + "' in a tuning problem");
    if (decl->param.is_tunable())
      throw Error(Errc::bad_parameter,
                  tmpl.name() + ": '" + name + "' is a tunable parameter, not a problem parameter");
  }
  return {tmpl.name(),      tuning_source_digest(tmpl), problem.sorted(),
          extents.sorted(), std::move(device),          std::move(compiler)};
}

std::vector<cache::KeyField> TuningKey::fields() const {
  cache::KeyBuilder builder;
  builder.add("kind", "tuning")
      .add("template", template_name)
      .add("source", source_digest)
      .add("problem", problem.to_string())
      .add("extents", extents.to_string())
      .add("target", device.target)
      .add("compute_units", std::to_string(device.compute_units))
      .add("compiler", compiler);
  return builder.fields();
}

cache::Key TuningKey::key() const { return cache::key_of(fields()); }

std::string tuning_source_digest(const Template &tmpl) {
  std::string text = tmpl.name() + '\n' + tmpl.kernel() + '\n' + tmpl.source() + '\n';
  for (const HeaderFile &header : tmpl.headers())
    text += header.name + '\n' + header.content + '\n';
  for (const std::string &option : tmpl.compile_options())
    text += option + '\n';
  for (const ParamDecl &decl : tmpl.params())
    text += decl.name + ' ' + decl.param.describe() + (decl.param.is_tunable() ? " tunable" : "") +
            '\n';
  return cache::sha256_hex(text);
}

std::string TuningRecord::to_json() const { return record_json(*this).dump(2) + '\n'; }

TuningRecord TuningRecord::from_json(std::string_view text) {
  const json object = json::parse(text, nullptr, false);
  if (object.is_discarded())
    throw Error(Errc::cache_io, "not valid JSON");
  try {
    return record_of(object);
  } catch (const json::exception &error) {
    throw Error(Errc::cache_io, std::string("not a tuning record: ") + error.what());
  }
}

bool TuningRecord::operator==(const TuningRecord &other) const {
  return key == other.key && key.device.name == other.key.device.name && winner == other.winner &&
         runners_up == other.runners_up && created_unix == other.created_unix;
}

std::string tuning_csv(const std::vector<TuningRecord> &records) {
  std::string out = "template,problem,extents,target,compute_units,device,compiler,winner,time_us,"
                    "runners_up,created_unix\n";
  // Fields are quoted: problems and winners hold commas.
  auto quoted = [](const std::string &text) {
    std::string out = "\"";
    for (char c : text)
      out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  for (const TuningRecord &record : records) {
    std::string runners;
    for (const TimedVariant &runner : record.runners_up)
      runners += (runners.empty() ? "" : "; ") + runner.params.to_string() + " " +
                 std::to_string(runner.time_us);
    out += quoted(record.key.template_name) + ',' + quoted(record.key.problem.to_string()) + ',' +
           quoted(record.key.extents.to_string()) + ',' + quoted(record.key.device.target) + ',' +
           std::to_string(record.key.device.compute_units) + ',' + quoted(record.key.device.name) +
           ',' + quoted(record.key.compiler) + ',' + quoted(record.winner.params.to_string()) +
           ',' + std::to_string(record.winner.time_us) + ',' + quoted(runners) + ',' +
           std::to_string(record.created_unix) + '\n';
  }
  return out;
}

TuningTable::TuningTable(fs::path user_root, fs::path prebuilt_root,
                         std::vector<cache::RemoteStorage> remotes, FleetWait fleet)
    : user_(tuning_directory(user_root)), prebuilt_(tuning_directory(prebuilt_root)),
      remote_(std::make_shared<RemoteTier>(std::move(remotes), fleet)),
      store_(std::make_shared<RecordStore<TuningKind>>(
          TuningKind{}, prebuilt_.empty() ? std::vector<fs::path>() : std::vector{prebuilt_},
          user_.empty() ? std::nullopt : std::optional(user_), *remote_, fleet)) {}

TuningTable TuningTable::from_config(const Config &config) {
  return TuningTable(config.cache_dir, config.prebuilt_dir, open_remotes(config), config.fleet);
}

fs::path TuningTable::user_directory() const { return user_; }

const fs::path &TuningTable::user_tier() const {
  if (user_.empty())
    throw Error(Errc::cache_io, "no user cache directory to keep tuning records in "
                                "(set KJIT_CACHE_DIR)");
  return user_;
}

std::optional<TuningRecord> TuningTable::find(const TuningKey &key) const {
  std::optional<Stored<TuningRecord>> found = store_->find(key);
  return found ? std::optional(std::move(found->record)) : std::nullopt;
}

void TuningTable::store(const TuningRecord &record) const {
  store_->kind().write(user_tier(), record);
}

TuningRecord TuningTable::find_or_tune(const TuningKey &key,
                                       const std::function<TuningRecord()> &tune) const {
  if (auto record = find(key))
    return *record;
  user_tier();
  const RecordStore<TuningKind>::Making making = store_->begin(key, /*reuse=*/true);
  if (making.published)
    return making.published->record;
  TuningRecord record = tune();
  store_->publish(making, record);
  return record;
}

std::vector<TuningRecord> TuningTable::list() const {
  std::vector<TuningRecord> records;
  list_in(prebuilt_, records);
  list_in(user_, records);
  std::stable_sort(records.begin(), records.end(), [](const auto &a, const auto &b) {
    return std::make_tuple(a.key.template_name, a.key.device.target, a.key.problem.to_string(),
                           a.key.extents.to_string()) <
           std::make_tuple(b.key.template_name, b.key.device.target, b.key.problem.to_string(),
                           b.key.extents.to_string());
  });
  return records;
}

std::size_t TuningTable::import_records(const std::vector<TuningRecord> &records) const {
  for (std::size_t i = 0; i < records.size(); ++i) {
    try {
      store(records[i]);
    } catch (const Error &error) {
      const std::string imported =
          i == 0 ? "imported none of " + counted(records.size(), "tuning record", "tuning records")
                 : "imported " + std::to_string(i) + " of " +
                       counted(records.size(), "tuning record", "tuning records") + " (" +
                       short_keys(records, 0, i) + ")";
      throw Error(error.code(), error.summary() + "; " + imported + ", not " +
                                    short_keys(records, i, records.size()));
    }
  }
  return records.size();
}

std::string winner_problem(const Template &tmpl, const TuningRecord &record) {
  ParamValues params = record.key.problem;
  for (const auto &[name, value] : record.winner.params) {
    if (tmpl.param(name) == nullptr)
      return "its winner sets '" + name + "', which is not a parameter of " + tmpl.name();
    if (record.key.problem.find(name) != nullptr)
      return "its winner sets '" + name + "', which is a problem parameter of its key";
    params.add(name, value);
  }
  try {
    tmpl.bind(params);
  } catch (const Error &error) {
    return "its winner " + record.winner.params.to_string() + " does not fit " + tmpl.name() +
           ": " + error.summary();
  }
  return {};
}

std::vector<TuningRecord> parse_tuning_records(std::string_view text, const std::string &origin) {
  const json document = json::parse(text, nullptr, false);
  if (document.is_discarded() || !document.is_object() || !document.contains("records") ||
      !document.at("records").is_array())
    throw Error(Errc::bad_archive,
                origin + ": not a tuning table (a JSON object with \"records\": [...])");
  std::vector<TuningRecord> records;
  std::size_t index = 0;
  for (const json &item : document.at("records")) {
    ++index;
    try {
      records.push_back(record_of(item));
      check_importable(records.back());
    } catch (const json::exception &error) {
      throw refused_record(origin, index, error.what());
    } catch (const Error &error) {
      throw refused_record(origin, index, error.summary());
    }
  }
  return records;
}

std::string tuning_records_json(const std::vector<TuningRecord> &records) {
  json list = json::array();
  for (const TuningRecord &record : records)
    list.push_back(record_json(record));
  return json{{"records", list}}.dump(2) + '\n';
}

cache::ArchiveSummary export_cache_archive(const cache::DiskStore &user, const fs::path &archive) {
  std::vector<std::string> records;
  for (const TuningRecord &record : TuningTable(user.root()).list())
    records.push_back(record.to_json());
  return cache::export_archive(user, archive, records);
}

cache::ArchiveSummary import_cache_archive(const cache::DiskStore &user, const fs::path &archive) {
  const cache::ArchiveContent content = cache::read_archive(user, archive);
  const TuningTable table(user.root());
  std::vector<TuningRecord> records;
  for (std::size_t i = 0; i < content.records.size(); ++i) {
    try {
      records.push_back(TuningRecord::from_json(content.records[i]));
      check_importable(records.back());
    } catch (const Error &error) {
      throw refused_record(archive.string(), i + 1, error.summary());
    }
  }
  cache::ArchiveSummary summary;
  try {
    summary = cache::import_entries(user, content);
  } catch (const Error &error) {
    throw Error(error.code(), archive.string() + ": " + error.summary() + "; " +
                                  entries_left_out(user, content, records.size()));
  }
  try {
    summary.records = table.import_records(records);
  } catch (const Error &error) {
    throw Error(error.code(), archive.string() + ": its " +
                                  counted(summary.entries, "new entry", "new entries") +
                                  " imported, then: " + error.summary());
  }
  return summary;
}

} // namespace kjit

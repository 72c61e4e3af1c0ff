#pragma once
// The tuning table: which tunable values (kjit/templates/template.hpp, ParamSchema::tunable) won
// for a problem on a device, as measured by the tuner (kjit/runtime/tuner.hpp).
//
// A record is keyed by everything that can change which variant is fastest: the template (name
// and a digest of its source, headers, options and parameter schema), the problem parameters,
// the device's target and compute-unit (SM) count, and the compiler's identity. A record for
// another GPU model or compiler has another key, so it is never found for this one; a record
// whose content does not match the key it is filed under (a planted, corrupt or hand-edited
// file) is skipped with one warning.
//
// Each tier keeps its records as files beside its code entries, in its tuning directory with a
// per-key OFD lock of their own, where kjit/cache/layout.hpp places them. The user tier is
// read-write; a prebuilt tier may ship records (`kjit prebuild --tuned`) and is read first, as for
// code. Files are trusted as entries are (kjit/cache/private_file.hpp).
//
// Records are shared with a fleet through the remote tiers (KJIT_REMOTE_STORAGE) as compiled
// entries are, through the same code: stored as "kjit/tuning/v<format>/<target>/<key hex>", signed
// with the fleet secret when one is set, every value read treated as untrusted input (its format,
// its key equal to the key of its content, that content the problem, device and compiler asked
// for) and any fault a miss with one warning per process and remote. A remote's record is kept in
// the user tier once found.
#include "kjit/cache/archive.hpp"
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/templates/template.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit {

class RemoteTier;
template <typename Record> struct Stored;
enum class Reading;
template <typename Kind> class RecordStore;

// The device a record was measured on, as far as it can change the winner.
struct TuningDevice {
  std::string target;    // "sm_90a", "gfx90a:sramecc+:xnack-"
  int compute_units = 0; // SMs or CUs
  std::string name = {}; // "NVIDIA H100 80GB HBM3": for people, not keyed
  bool operator==(const TuningDevice &) const = default;
};

// What a record is looked up by.
struct TuningKey {
  std::string template_name;
  std::string source_digest; // tuning_source_digest(template)
  ParamValues problem;       // the problem parameters, sorted by name
  // Sizes the template leaves to the launch that change the winner (rows), sorted by name.
  ParamValues extents;
  TuningDevice device;
  std::string compiler; // the compiler's identity

  // For `problem` of `tmpl` over `extents` on `device` with `compiler`: both are sorted, and
  // problem must name problem parameters only. Throws Error(bad_parameter) for a tunable or unknown
  // one.
  static TuningKey of(const Template &tmpl, const ParamValues &problem, const ParamValues &extents,
                      TuningDevice device, std::string compiler);
  // The fields hashed, in order (kjit/cache/key.hpp), and their SHA-256.
  std::vector<cache::KeyField> fields() const;
  cache::Key key() const;
  // Same fields (the device's name is not one).
  bool operator==(const TuningKey &other) const;
};

// SHA-256 over what defines a template's code and schema: name, kernel, source, headers, compile
// options and each parameter's declaration.
std::string tuning_source_digest(const Template &tmpl);

// One timed candidate: its tunable values and its median time.
struct TimedVariant {
  ParamValues params;
  double time_us = 0;
  // The same values, whatever their order (a record read back lists them by name).
  bool operator==(const TimedVariant &other) const;
};

struct TuningRecord {
  TuningKey key;
  TimedVariant winner;
  std::vector<TimedVariant> runners_up; // fastest first
  std::int64_t created_unix = 0;

  // The record as JSON text, and back. from_json throws Error(cache_io) naming what is wrong.
  std::string to_json() const;
  static TuningRecord from_json(std::string_view text);
  bool operator==(const TuningRecord &) const;
};

// Tuning records as a kind of record of the record store (runtime/src/record_store.hpp): each tier
// is a tuning directory (<root>/v<N>/tuning), a record one file in it, shared with a fleet as
// "kjit/tuning/v<format>/<target>/<key hex>".
struct TuningKind {
  using Record = TuningRecord;
  using Key = TuningKey;
  using Tier = std::filesystem::path;
  static constexpr std::string_view made = "tuning records made";
  static constexpr std::string_view work = "tuning";

  std::optional<Stored<Record>> read(const Tier &directory, const Key &key, Origin origin,
                                     Reading reading) const;
  std::filesystem::path write(const Tier &directory, const Record &record) const;
  std::optional<cache::FileLock> lock(const Tier &directory, const Key &key, FleetWait wait) const;
  bool shared(const Key &) const { return true; }
  cache::RecordKey remote_key(const Key &key) const;
  cache::RecordKey remote_key_of(const Record &record) const;
  std::string decode(const Key &key, std::span<const std::byte> value,
                     std::optional<Record> &out) const;
  std::vector<std::byte> encode(const Record &record) const;
};

// "bfloat16,4096,sm_90a,132,rms_norm,..." rows for people: one per record (AITER's CSV spirit).
std::string tuning_csv(const std::vector<TuningRecord> &records);

class TuningTable {
public:
  // `user_root`: the user tier's root (may be empty: nothing is stored); `prebuilt_root`: a
  // read-only tier's root (may be empty or missing); `remotes`: the remote tiers records are shared
  // through, and how long a tuner waits for another node's record (`fleet`).
  TuningTable(std::filesystem::path user_root, std::filesystem::path prebuilt_root = {},
              std::vector<cache::RemoteStorage> remotes = {}, FleetWait fleet = {});
  // The tiers a Runtime with `config` uses.
  static TuningTable from_config(const Config &config);

  // The record for `key`: the prebuilt tier's, else the user tier's, else a remote's (then kept in
  // the user tier); nullopt when none has a valid one. A file that is corrupt or does not match
  // `key` is skipped with one warning per file and process, a remote's value with one warning per
  // remote and process. Never throws.
  std::optional<TuningRecord> find(const TuningKey &key) const;

  // Publishes `record` into the user tier (atomically, by rename). Throws Error(cache_io).
  void store(const TuningRecord &record) const;

  // The record for `key`, tuning it with `tune` when there is none, then publishing it to the user
  // tier and the remotes. Concurrent tuners of one problem tune it once and the others take its
  // record, as compiles do: on one machine (threads or processes) the key's file lock in the user
  // tier orders them, and a tuner that dies releases it at once; across a fleet the lease on the
  // record in a remote does, and a tuner that dies loses it within FleetWait::lease_ttl
  // (KJIT_REMOTE_LEASE_MS). Either is waited on at most FleetWait::wait (KJIT_REMOTE_WAIT_MS,
  // default 60 s) before tuning here anyway. Throws what `tune` throws, and Error(cache_io) when
  // there is no user tier.
  TuningRecord find_or_tune(const TuningKey &key, const std::function<TuningRecord()> &tune) const;

  // Every valid record of both tiers (the prebuilt tier's first), sorted by template, target and
  // problem; bad files are skipped with one warning each.
  std::vector<TuningRecord> list() const;

  // Stores each of `records` under the key it holds, in order, replacing older ones; returns how
  // many. Check them first (parse_tuning_records does): this only writes. Throws Error(cache_io)
  // for a table without a user tier or a write that fails, naming (by key) the records imported
  // before it and those not imported.
  std::size_t import_records(const std::vector<TuningRecord> &records) const;

  // The user tier's tuning directory (kjit/cache/layout.hpp).
  std::filesystem::path user_directory() const;

private:
  // The user tier's directory; throws Error(cache_io) when there is none.
  const std::filesystem::path &user_tier() const;

  std::filesystem::path user_;     // the user tier's tuning directory, or empty
  std::filesystem::path prebuilt_; // likewise
  std::shared_ptr<RemoteTier> remote_;
  std::shared_ptr<RecordStore<TuningKind>> store_;
};

// Why the winner of `record` cannot be launched as a variant of `tmpl`, or "" when it can: it sets
// parameters of `tmpl` that are not the record's problem parameters, and with the problem binds to
// `tmpl`'s schema. A record is untrusted input (imported, a remote's, a file planted in a tier): a
// winner with VEC=3 must reach neither a table nor a launch.
std::string winner_problem(const Template &tmpl, const TuningRecord &record);

// The records of a JSON document {"records": [...]} (what `kjit tune ls --json` and
// `kjit tune export` print), each checked as untrusted input: its key the key of its content, a
// target that can name a directory, a winner that fits its template (winner_problem) where that is
// a built-in one of the same source. Throws Error(bad_archive) naming the first record refused.
std::vector<TuningRecord> parse_tuning_records(std::string_view text, const std::string &origin);
std::string tuning_records_json(const std::vector<TuningRecord> &records);

// `kjit cache export`: the valid entries and tuning records of the user tier at `user` in one
// archive (kjit/cache/archive.hpp). Throws Error(cache_io) when it cannot be written.
cache::ArchiveSummary export_cache_archive(const cache::DiskStore &user,
                                           const std::filesystem::path &archive);
// `kjit cache import`: the archive checked whole, its records as untrusted input too (as
// parse_tuning_records checks them), before anything is written; then its entries and records are
// added to the user tier at `user`. A record for another device or compiler is kept under its own
// key, so it is never found for this one. Throws Error(bad_archive) naming the archive and the
// record or entry, with nothing written; a write that fails (a full disk) is the write's
// Error(cache_io), saying which entries (archive positions) and records were not imported.
cache::ArchiveSummary import_cache_archive(const cache::DiskStore &user,
                                           const std::filesystem::path &archive);

} // namespace kjit

#pragma once
// One store for every kind of record kjit keeps (docs/ARCHITECTURE.md, "The record store"): code
// entries (entry_kind.hpp) and tuning records (kjit/runtime/tuning_table.hpp). The cascade is
// written here once, for any kind:
//   find:    each prebuilt tier in order, the user tier, (stand-ins in the local tiers), the
//   remote,
//            whose hit is kept in the user tier;
//   begin:   the key's file lock in the user tier, waited on at most FleetWait::wait; the user tier
//            read again; the remote lease, waited on at most FleetWait::wait;
//   publish: the user tier (atomically, by rename), then the remote (never overwriting).
// What differs between kinds is what a Kind says: how a record is keyed, where it lives in a tier,
// how it is read, written and checked. As in ccache's storage facade, every fault of a tier is a
// miss there (warned about once) and the cascade carries on.
//
// One waiting policy for every kind: a waiter for another process's lock or another node's lease
// waits at most FleetWait::wait (KJIT_REMOTE_WAIT_MS, 60 s by default), then makes the record
// itself. A holder that hangs costs its waiters a duplicate compile or tuning, never a hang.
#include "kjit/cache/file_lock.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/runtime.hpp"
#include "remote_tier.hpp"

#include <atomic>
#include <concepts>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit {

// A record and where it came from.
template <typename Record> struct Stored {
  Record record;
  Origin origin;
  std::filesystem::path path; // where it is on disk; empty when it lives in memory only
};

// Whether a read is a lookup's or the one repeated under the key's lock (after a lookup that
// reported what it found: a re-read warns about nothing, and removes a rejected record from the
// user tier so that its write is not refused).
enum class Reading { lookup, again };

// What the store needs of a kind of record.
template <typename K>
concept RecordKind = requires(const K kind, const typename K::Tier &tier,
                              const typename K::Key &key, const typename K::Record &record,
                              std::span<const std::byte> bytes,
                              std::optional<typename K::Record> &out, FleetWait wait) {
  // What this process makes, for the warning that a user tier is unusable: "variants compiled".
  { K::made } -> std::convertible_to<std::string_view>;
  // How a record is made, for the log lines of a waiter: "compiling", "tuning".
  { K::work } -> std::convertible_to<std::string_view>;
  // The record of `key` in `tier`, verified, or nullopt (a bad one warned about once, a re-read
  // silent). Never throws.
  {
    kind.read(tier, key, Origin::user_cache, Reading::lookup)
    } -> std::same_as<std::optional<Stored<typename K::Record>>>;
  // Publishes `record` into `tier`; returns where. Throws Error(cache_io).
  { kind.write(tier, record) } -> std::same_as<std::filesystem::path>;
  // The lock of `key` in `tier` once taken within `wait` (polling every `wait.poll`); nullopt
  // when another holder keeps it that long. Throws Error(cache_io).
  { kind.lock(tier, key, wait) } -> std::same_as<std::optional<cache::FileLock>>;
  // Whether the remotes are asked and published to for `key`.
  { kind.shared(key) } -> std::same_as<bool>;
  // The remote's name for `key`, and for the record it publishes.
  { kind.remote_key(key) } -> std::same_as<cache::RecordKey>;
  { kind.remote_key_of(record) } -> std::same_as<cache::RecordKey>;
  // The record a remote's value holds for `key`, checked as the untrusted input it is: empty
  // and the record in `out`, or why it is refused.
  { kind.decode(key, bytes, out) } -> std::same_as<std::string>;
  { kind.encode(record) } -> std::same_as<std::vector<std::byte>>;
};

template <typename Kind> class RecordStore {
  static_assert(RecordKind<Kind>);

public:
  using Record = typename Kind::Record;
  using Key = typename Kind::Key;
  using Tier = typename Kind::Tier;
  using Found = Stored<Record>;

  // `prebuilt`: the read-only tiers in lookup order; `user`: the read-write tier, or none.
  RecordStore(Kind kind, std::vector<Tier> prebuilt, std::optional<Tier> user, RemoteTier &remote,
              FleetWait fleet)
      : kind_(std::move(kind)), prebuilt_(std::move(prebuilt)), user_(std::move(user)),
        remote_(remote), fleet_(fleet) {}

  // The user tier while it is usable: none without one, or after a write to it failed.
  const Tier *user() const { return user_ && !user_disabled_ ? &*user_ : nullptr; }
  const std::vector<Tier> &prebuilt() const { return prebuilt_; }

  // Records for other keys that serve `key` too (a code object built for a target whose code runs
  // on the one asked for): asked of the local tiers, in order, only when they miss `key` itself.
  using MakeStandIns = std::function<std::vector<Key>()>;
  // Whether a found record can be used by the caller (an AMD code object the device's runtime
  // loads), given where it was found (empty: a remote): one that cannot is a miss in its tier.
  using Usable = std::function<bool(const Record &, const std::filesystem::path &)>;

  // The cascade: the prebuilt tiers then the user tier for `key`, then for each stand-in, then
  // the remotes (when the kind shares `key`), whose hit is kept in the user tier.
  std::optional<Found> find(const Key &key, const MakeStandIns &stand_ins = {},
                            const Usable &usable = {}) {
    if (auto found = find_local(key, usable))
      return found;
    if (stand_ins && (!prebuilt_.empty() || user_))
      for (const Key &stand_in : stand_ins())
        if (auto found = find_local(stand_in, usable))
          return found;
    if (!kind_.shared(key))
      return std::nullopt;
    std::optional<Record> record;
    if (!remote_.find(kind_.remote_key(key), verifier(key, record)) ||
        (usable && !usable(*record, {})))
      return std::nullopt;
    return promoted(std::move(*record));
  }

  // Makes one record of a key per machine and per fleet. While held, the key's file lock in the
  // user tier and the remote lease (when this process took it) are this process's.
  class Making {
  public:
    // What another process or node published while this one waited: then nothing to make.
    std::optional<Found> published;
    // Whether this process holds the key's lock in the user tier.
    bool locked() const { return lock_.has_value(); }

  private:
    friend class RecordStore;
    std::optional<cache::FileLock> lock_;
    bool keep_ = false;   // a user tier to publish into (locked, or its wait ran out)
    bool shared_ = false; // publish to the remotes
    std::unique_ptr<RemoteTier::Claim> claim_;
  };
  // Before making the record of `key`: takes the key's lock in the user tier; with `reuse` (not
  // KJIT_REBUILD), reads the user tier again (another process may have published it while this
  // one waited), then takes the remote lease or waits for the node that holds it.
  Making begin(const Key &key, bool reuse) {
    Making making;
    making.shared_ = kind_.shared(key);
    if (const Tier *tier = user()) {
      try {
        making.lock_ = kind_.lock(*tier, key, fleet_);
        making.keep_ = true;
        if (!making.lock_)
          log().info("the process {} {} did not finish within {} ms; {} it here", Kind::work,
                     kind_.remote_key(key).key.hex(), fleet_.wait.count(), Kind::work);
      } catch (const Error &error) {
        unusable(error);
      }
      if (making.lock_ && reuse)
        if (auto found = kind_.read(*tier, key, Origin::user_cache, Reading::again)) {
          making.published = std::move(found);
          return making;
        }
    }
    // One per fleet: the lease holder makes it, the others take what it publishes.
    std::optional<Record> record;
    if (reuse && making.shared_ &&
        remote_.claim_or_wait(kind_.remote_key(key), verifier(key, record), Kind::work,
                              making.claim_))
      making.published = promoted(std::move(*record));
    return making;
  }

  // Publishes a record made under `making`: to the user tier where there is one, and to the
  // remotes. Returns where it is on disk, or empty.
  std::filesystem::path publish(const Making &making, const Record &record) {
    std::filesystem::path path = making.keep_ ? keep(record) : std::filesystem::path();
    if (making.shared_)
      remote_.publish(kind_.remote_key_of(record), kind_.encode(record));
    return path;
  }

  // Writes `record` into the user tier; returns where, or empty when there is no usable one (a
  // failed write is warned about once, then the tier is left alone).
  std::filesystem::path keep(const Record &record) {
    const Tier *tier = user();
    if (!tier)
      return {};
    try {
      return kind_.write(*tier, record);
    } catch (const Error &error) {
      unusable(error);
      return {};
    }
  }

  // Warns once per store, then keeps what this process makes in memory only.
  void unusable(const Error &error) {
    if (!user_disabled_.exchange(true))
      log().warn("{}; {} by this process are kept in memory only", error.summary(), Kind::made);
  }

  const Kind &kind() const { return kind_; }

private:
  std::optional<Found> find_local(const Key &key, const Usable &usable) const {
    for (const Tier &tier : prebuilt_)
      if (auto found = kind_.read(tier, key, Origin::prebuilt, Reading::lookup))
        if (!usable || usable(found->record, found->path))
          return found;
    if (user_)
      if (auto found = kind_.read(*user_, key, Origin::user_cache, Reading::lookup))
        if (!usable || usable(found->record, found->path))
          return found;
    return std::nullopt;
  }

  // Checks a remote's value for `key` (Kind::decode), keeping the record it accepts in `out`.
  RemoteTier::Verify verifier(const Key &key, std::optional<Record> &out) const {
    return [this, &key, &out](const cache::RecordKey &, std::span<const std::byte> value) {
      return kind_.decode(key, value, out);
    };
  }

  // A remote's record, kept in the user tier so that the next process finds it on disk.
  Found promoted(Record record) {
    std::filesystem::path path = keep(record);
    return Found{std::move(record), Origin::remote, std::move(path)};
  }

  Kind kind_;
  std::vector<Tier> prebuilt_;
  std::optional<Tier> user_;
  RemoteTier &remote_;
  FleetWait fleet_;
  std::atomic<bool> user_disabled_ = false;
};

} // namespace kjit

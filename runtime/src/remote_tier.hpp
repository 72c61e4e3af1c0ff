#pragma once
// The remote tiers (KJIT_REMOTE_STORAGE) as a Runtime and the tuning table use them, for any kind
// of record (compiled entries, tuning records): every value read from a remote is untrusted input,
// checked by its kind's verifier before anything uses it; records are published with a write that
// never overwrites, and a missing one is made (compiled, tuned) once per fleet through a lease.
// Every remote fault, a value refused included, is a miss, warned about once per process and
// remote, and counted; the caller carries on from its other tiers.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/explain.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kjit {

class RemoteTier {
public:
  RemoteTier(std::vector<cache::RemoteStorage> remotes, FleetWait fleet);
  ~RemoteTier();
  RemoteTier(const RemoteTier &) = delete;
  RemoteTier &operator=(const RemoteTier &) = delete;

  bool empty() const { return remotes_.empty(); }

  // Checks a value read from a remote for `record` before anything uses it: empty when it is a
  // valid record of that kind for that key (the verifier keeps what it decoded), else why it is
  // not, for the warning.
  using Verify =
      std::function<std::string(const cache::RecordKey &record, std::span<const std::byte> value)>;

  // True when a remote has a value for `record` that `verify` accepts, asking the remotes in order.
  // A value it refuses is a miss, warned about once.
  bool find(const cache::RecordKey &record, const Verify &verify);
  // Publishes `value` under `record` to every writable remote, keeping a value already there.
  void publish(const cache::RecordKey &record, std::span<const std::byte> value);

  // Replaces the value under `record` in every writable remote by what `merge` makes of the value
  // there (nullopt: none, or one that could not be read): for a record that accumulates, a header
  // manifest's results. Two nodes merging at once may lose one's addition (a later miss, never a
  // wrong record). `merge` gets the value unverified and decodes it as untrusted input.
  using Merge =
      std::function<std::vector<std::byte>(std::optional<std::span<const std::byte>> current)>;
  void merge(const cache::RecordKey &record, const Merge &merge);

  // The verified entry for `key` on `target` from the first remote that has a valid one.
  std::optional<cache::Entry> find(const cache::Key &key, const std::string &target);
  // Publishes `entry` to every writable remote, keeping a value already there.
  void publish(const cache::Entry &entry);

  // While held, this process makes the record for the fleet: its lease is renewed until the
  // claim ends, then released (compare and delete).
  class Claim {
  public:
    ~Claim();
    Claim(const Claim &) = delete;
    Claim &operator=(const Claim &) = delete;

  private:
    friend class RemoteTier;
    Claim(RemoteTier &tier, cache::RemoteStorage &remote, cache::RecordKey record,
          cache::RemoteLeases::Token token);
    void renew_until_released();
    RemoteTier &tier_;
    cache::RemoteStorage &remote_;
    cache::RecordKey record_;
    cache::RemoteLeases::Token token_;
    std::mutex mutex_;
    std::condition_variable released_;
    bool done_ = false;
    std::thread renewer_;
  };
  // Before making a missing record (`work` says how: "compiling", "tuning"): true when another
  // node published one that `verify` accepts while this one waited on its lease (at most
  // FleetWait::wait); otherwise false, with `claim` holding the lease when this process took it (it
  // makes the record for the fleet) or empty (no lease to take, or the wait ran out: it makes it
  // anyway). A holder that dies stops renewing its lease, so a waiter takes it over within
  // FleetWait::lease_ttl.
  bool claim_or_wait(const cache::RecordKey &record, const Verify &verify, std::string_view work,
                     std::unique_ptr<Claim> &claim);
  // The same for a compiled entry: the entry another node published, or nothing.
  std::optional<cache::Entry> claim_or_wait(const cache::Key &key, const std::string &target,
                                            std::unique_ptr<Claim> &claim);

  // What each remote holds under `key` for `target`, in order, counting and warning nothing: for
  // Runtime::explain. A value is decoded as a lookup decodes it.
  std::vector<TierLookup> probe(const cache::Key &key, const std::string &target) const;

  // The remote_* counters of what this tier did.
  cache::CacheCounters counters() const;

private:
  // Counts a fault and warns about it once per process and remote.
  void fault(const cache::RemoteStorage &remote, const cache::RemoteFault &fault);
  void count_miss();
  // A lookup counts one remote miss; the re-reads of claim_or_wait while it waits for another
  // node's lease are part of that one lookup, so they count none.
  enum class MissCounting { counted, uncounted };
  bool find(const cache::RecordKey &record, const Verify &verify, MissCounting counting);

  std::vector<cache::RemoteStorage> remotes_;
  FleetWait fleet_;
  mutable std::mutex counters_mutex_;
  cache::CacheCounters counters_;
};

} // namespace kjit

#pragma once
// The remote tiers (KJIT_REMOTE_STORAGE) as a Runtime uses them: entries read from a remote are
// verified as disk entries are, published with a write that never overwrites, and a missing
// variant is compiled once per fleet through a lease. Every remote fault is a miss, warned about
// once per process and remote, and counted; the Runtime carries on from its other tiers.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/remote.hpp"
#include "kjit/cache/stats.hpp"
#include "kjit/runtime/config.hpp"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
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

  // The verified entry for `key` on `target` from the first remote that has a valid one. A value
  // that is not a valid entry for them is a miss, warned about once.
  std::optional<cache::Entry> find(const cache::Key &key, const std::string &target);

  // Publishes `entry` to every writable remote, keeping a value already there.
  void publish(const cache::Entry &entry);

  // While held, this process compiles the record for the fleet: its lease is renewed until the
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
  // Before compiling a missing variant: the entry when another node published it while this one
  // waited on its lease; otherwise nothing, with `claim` holding the lease when this process took
  // it (it compiles for the fleet) or empty (no lease to take, or the wait ran out: it compiles
  // anyway).
  std::optional<cache::Entry> claim_or_wait(const cache::Key &key, const std::string &target,
                                            std::unique_ptr<Claim> &claim);

  // The remote_* counters of what this tier did.
  cache::CacheCounters counters() const;

private:
  // Counts a fault and warns about it once per process and remote.
  void fault(const cache::RemoteStorage &remote, const cache::RemoteFault &fault);
  void count_miss();
  // A lookup counts one remote miss; the re-reads of claim_or_wait while it waits for another
  // node's lease are part of that one lookup, so they count none.
  enum class MissCounting { counted, uncounted };
  std::optional<cache::Entry> find(const cache::Key &key, const std::string &target,
                                   MissCounting counting);
  std::optional<cache::Entry> verified(const cache::RemoteStorage &remote,
                                       const cache::RecordKey &record,
                                       const std::vector<std::byte> &value);

  std::vector<cache::RemoteStorage> remotes_;
  FleetWait fleet_;
  mutable std::mutex counters_mutex_;
  cache::CacheCounters counters_;
};

} // namespace kjit

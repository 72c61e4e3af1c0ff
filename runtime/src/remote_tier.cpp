#include "remote_tier.hpp"

#include "kjit/log.hpp"

namespace kjit {

namespace {

bool writable(const cache::RemoteStorage &remote) { return !remote.read_only && remote.backend; }

} // namespace

RemoteTier::RemoteTier(std::vector<cache::RemoteStorage> remotes, FleetWait fleet)
    : remotes_(std::move(remotes)), fleet_(fleet) {}

RemoteTier::~RemoteTier() = default;

void RemoteTier::fault(const cache::RemoteStorage &remote, const cache::RemoteFault &fault) {
  {
    std::lock_guard lock(counters_mutex_);
    ++(fault.failure == cache::RemoteFailure::timeout ? counters_.remote_timeouts
                                                      : counters_.remote_errors);
  }
  // One warning per process and remote: a dead server must not flood the log of every lookup.
  if (first_warning_about("remote " + remote.description))
    log().warn("remote cache {}: {} ({}); carrying on without it where it fails",
               remote.description, fault.message, to_string(fault.failure));
}

void RemoteTier::count_miss() {
  std::lock_guard lock(counters_mutex_);
  ++counters_.remote_misses;
}

cache::CacheCounters RemoteTier::counters() const {
  std::lock_guard lock(counters_mutex_);
  return counters_;
}

std::optional<cache::Entry> RemoteTier::verified(const cache::RemoteStorage &remote,
                                                 const cache::RecordKey &record,
                                                 const std::vector<std::byte> &value) {
  cache::Decoded decoded = cache::decode_record_entry(value, record);
  if (!decoded.entry)
    fault(remote,
          {cache::RemoteFailure::refused,
           "ignoring the value of " + cache::storage_name(record) + ": " + decoded.problem});
  return std::move(decoded.entry);
}

std::optional<cache::Entry> RemoteTier::find(const cache::Key &key, const std::string &target) {
  return find(key, target, MissCounting::counted);
}

std::optional<cache::Entry> RemoteTier::find(const cache::Key &key, const std::string &target,
                                             MissCounting counting) {
  const cache::RecordKey record{cache::kEntryRecord, target, key};
  for (const cache::RemoteStorage &remote : remotes_) {
    auto got = remote.backend->get(record);
    if (!got.ok()) {
      fault(remote, got.fault());
      continue;
    }
    if (!got.value()) {
      if (counting == MissCounting::counted)
        count_miss();
      continue;
    }
    if (auto entry = verified(remote, record, *got.value()))
      return entry;
  }
  return std::nullopt;
}

void RemoteTier::publish(const cache::Entry &entry) {
  const cache::RecordKey record{cache::kEntryRecord, entry.header.target, entry.header.key};
  const std::vector<std::byte> bytes = cache::encode_entry(entry);
  for (const cache::RemoteStorage &remote : remotes_)
    if (writable(remote))
      if (auto put = remote.backend->put(record, bytes, cache::PutMode::only_if_absent); !put.ok())
        fault(remote, put.fault());
}

std::optional<cache::Entry> RemoteTier::claim_or_wait(const cache::Key &key,
                                                      const std::string &target,
                                                      std::unique_ptr<Claim> &claim) {
  const cache::RecordKey record{cache::kEntryRecord, target, key};
  for (cache::RemoteStorage &remote : remotes_) {
    if (!writable(remote) || !remote.leases)
      continue;
    const auto deadline = std::chrono::steady_clock::now() + fleet_.wait;
    while (true) {
      auto taken = remote.leases->try_acquire(record, fleet_.lease_ttl);
      if (!taken.ok()) {
        fault(remote, taken.fault());
        return std::nullopt;
      }
      if (taken.value()) {
        claim.reset(new Claim(*this, remote, record, std::move(*taken.value())));
        // Published between this process's lookup and its lease: nothing left to compile.
        return find(key, target, MissCounting::uncounted);
      }
      if (auto published = find(key, target, MissCounting::uncounted))
        return published;
      if (std::chrono::steady_clock::now() + fleet_.poll > deadline)
        break;
      std::this_thread::sleep_for(fleet_.poll);
    }
    log().info("remote cache {}: the node compiling {} did not publish it within {} ms; "
               "compiling it here",
               remote.description, key.hex(), fleet_.wait.count());
    return std::nullopt;
  }
  return std::nullopt;
}

RemoteTier::Claim::Claim(RemoteTier &tier, cache::RemoteStorage &remote, cache::RecordKey record,
                         cache::RemoteLeases::Token token)
    : tier_(tier), remote_(remote), record_(std::move(record)), token_(std::move(token)),
      renewer_([this] { renew_until_released(); }) {}

void RemoteTier::Claim::renew_until_released() {
  const auto every = std::max(tier_.fleet_.lease_ttl / 3, std::chrono::milliseconds(1));
  std::unique_lock lock(mutex_);
  while (!released_.wait_for(lock, every, [this] { return done_; })) {
    auto renewed = remote_.leases->renew(record_, token_, tier_.fleet_.lease_ttl);
    if (!renewed.ok())
      tier_.fault(remote_, renewed.fault());
    else if (!renewed.value())
      return; // lost (expired while this process stalled): another node may compile it too
  }
}

RemoteTier::Claim::~Claim() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  released_.notify_one();
  renewer_.join();
  if (auto released = remote_.leases->release(record_, token_); !released.ok())
    tier_.fault(remote_, released.fault());
}

} // namespace kjit

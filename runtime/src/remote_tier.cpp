#include "remote_tier.hpp"

#include "kjit/log.hpp"

namespace kjit {

namespace {

bool writable(const cache::RemoteStorage &remote) { return !remote.read_only && remote.backend; }

cache::RecordKey entry_record(const cache::Key &key, const std::string &target) {
  return {cache::kEntryRecord, target, key};
}

// A compiled entry's verifier, keeping the entry it accepts in `out`.
RemoteTier::Verify entry_verifier(std::optional<cache::Entry> &out) {
  return [&out](const cache::RecordKey &record, std::span<const std::byte> value) {
    cache::Decoded decoded = cache::decode_record_entry(value, record);
    out = std::move(decoded.entry);
    return out ? std::string() : decoded.problem;
  };
}

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

std::vector<TierLookup> RemoteTier::probe(const cache::Key &key, const std::string &target) const {
  std::vector<TierLookup> lookups;
  const cache::RecordKey record = entry_record(key, target);
  for (const cache::RemoteStorage &remote : remotes_) {
    TierLookup &lookup = lookups.emplace_back();
    lookup.tier = "remote " + remote.description;
    lookup.target = target;
    auto got = remote.backend->get(record);
    if (!got.ok()) {
      lookup.state = got.fault().failure == cache::RemoteFailure::refused
                         ? TierLookup::State::rejected
                         : TierLookup::State::unreachable;
      lookup.detail = got.fault().message;
    } else if (got.value()) {
      const cache::Decoded decoded = cache::decode_record_entry(*got.value(), record);
      lookup.state = decoded.entry ? TierLookup::State::holds : TierLookup::State::rejected;
      lookup.detail = decoded.problem;
    }
  }
  return lookups;
}

cache::CacheCounters RemoteTier::counters() const {
  std::lock_guard lock(counters_mutex_);
  return counters_;
}

bool RemoteTier::find(const cache::RecordKey &record, const Verify &verify) {
  return find(record, verify, MissCounting::counted);
}

bool RemoteTier::find(const cache::RecordKey &record, const Verify &verify, MissCounting counting) {
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
    const std::string problem = verify(record, *got.value());
    if (problem.empty())
      return true;
    fault(remote, {cache::RemoteFailure::refused,
                   "ignoring the value of " + cache::storage_name(record) + ": " + problem});
  }
  return false;
}

void RemoteTier::publish(const cache::RecordKey &record, std::span<const std::byte> value) {
  for (const cache::RemoteStorage &remote : remotes_)
    if (writable(remote))
      if (auto put = remote.backend->put(record, value, cache::PutMode::only_if_absent); !put.ok())
        fault(remote, put.fault());
}

void RemoteTier::merge(const cache::RecordKey &record, const Merge &merge) {
  for (const cache::RemoteStorage &remote : remotes_) {
    if (!writable(remote))
      continue;
    auto got = remote.backend->get(record);
    if (!got.ok() && got.fault().failure != cache::RemoteFailure::refused) {
      fault(remote, got.fault());
      continue;
    }
    std::optional<std::span<const std::byte>> current;
    if (got.ok() && got.value())
      current = *got.value();
    // A value refused (too long, not a string) is replaced.
    if (auto put = remote.backend->put(record, merge(current), cache::PutMode::overwrite);
        !put.ok())
      fault(remote, put.fault());
  }
}

std::optional<cache::Entry> RemoteTier::find(const cache::Key &key, const std::string &target) {
  std::optional<cache::Entry> entry;
  find(entry_record(key, target), entry_verifier(entry));
  return entry;
}

void RemoteTier::publish(const cache::Entry &entry) {
  publish(entry_record(entry.header.key, entry.header.target), cache::encode_entry(entry));
}

bool RemoteTier::claim_or_wait(const cache::RecordKey &record, const Verify &verify,
                               std::string_view work, std::unique_ptr<Claim> &claim) {
  for (cache::RemoteStorage &remote : remotes_) {
    if (!writable(remote) || !remote.leases)
      continue;
    const auto deadline = std::chrono::steady_clock::now() + fleet_.wait;
    while (true) {
      auto taken = remote.leases->try_acquire(record, fleet_.lease_ttl);
      if (!taken.ok()) {
        fault(remote, taken.fault());
        return false;
      }
      if (taken.value()) {
        claim.reset(new Claim(*this, remote, record, std::move(*taken.value())));
        // Published between this process's lookup and its lease: nothing left to make.
        return find(record, verify, MissCounting::uncounted);
      }
      if (find(record, verify, MissCounting::uncounted))
        return true;
      if (std::chrono::steady_clock::now() + fleet_.poll > deadline)
        break;
      std::this_thread::sleep_for(fleet_.poll);
    }
    log().info("remote cache {}: the node {} {} did not publish it within {} ms; {} it here",
               remote.description, work, record.key.hex(), fleet_.wait.count(), work);
    return false;
  }
  return false;
}

std::optional<cache::Entry> RemoteTier::claim_or_wait(const cache::Key &key,
                                                      const std::string &target,
                                                      std::unique_ptr<Claim> &claim) {
  std::optional<cache::Entry> entry;
  claim_or_wait(entry_record(key, target), entry_verifier(entry), "compiling", claim);
  return entry;
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

#pragma once
// An in-process remote store: a map behind the three remote interfaces, with failures and delays
// a test injects, so that the tiered store's remote wiring is tested without a server. Leases
// expire by the steady clock as a server's would.
#include "kjit/cache/remote.hpp"
#include "kjit/cache/remote_registry.hpp"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace kjit::testing {

class FakeRemote final : public cache::RemoteBackend,
                         public cache::RemoteLeases,
                         public cache::RemoteListing {
public:
  // Every operation fails with this fault while it is set.
  void fail_with(std::optional<cache::RemoteFault> fault) {
    std::lock_guard lock(mutex_);
    fault_ = std::move(fault);
  }
  // Every operation first sleeps this long; past `timeouts.operation` it is a timeout, as a stalled
  // server's would be.
  void delay(std::chrono::milliseconds each, cache::RemoteTimeouts timeouts = {}) {
    std::lock_guard lock(mutex_);
    delay_ = each;
    timeouts_ = timeouts;
  }

  // Direct access, behind kjit's back.
  void set_raw(const cache::RecordKey &record, std::vector<std::byte> value) {
    std::lock_guard lock(mutex_);
    values_[cache::storage_name(record)] = std::move(value);
  }
  std::optional<std::vector<std::byte>> raw(const cache::RecordKey &record) const {
    std::lock_guard lock(mutex_);
    auto found = values_.find(cache::storage_name(record));
    if (found == values_.end())
      return std::nullopt;
    return found->second;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return values_.size();
  }
  int gets() const { return gets_; }
  int puts() const { return puts_; }

  cache::RemoteResult<std::optional<std::vector<std::byte>>>
  get(const cache::RecordKey &record) override {
    ++gets_;
    if (auto fault = injected())
      return *fault;
    return raw(record);
  }

  cache::RemoteResult<cache::PutOutcome> put(const cache::RecordKey &record,
                                             std::span<const std::byte> value,
                                             cache::PutMode mode) override {
    ++puts_;
    if (auto fault = injected())
      return *fault;
    std::lock_guard lock(mutex_);
    auto [at, inserted] = values_.try_emplace(cache::storage_name(record));
    if (!inserted && mode == cache::PutMode::only_if_absent)
      return cache::PutOutcome::already_present;
    at->second.assign(value.begin(), value.end());
    return cache::PutOutcome::stored;
  }

  cache::RemoteResult<bool> remove(const cache::RecordKey &record) override {
    if (auto fault = injected())
      return *fault;
    std::lock_guard lock(mutex_);
    return values_.erase(cache::storage_name(record)) > 0;
  }

  cache::RemoteResult<std::optional<Token>> try_acquire(const cache::RecordKey &record,
                                                        std::chrono::milliseconds ttl) override {
    if (auto fault = injected())
      return *fault;
    std::lock_guard lock(mutex_);
    Lease &lease = leases_[cache::lease_name(record)];
    if (!lease.token.empty() && Clock::now() < lease.expires)
      return std::optional<Token>();
    lease = {"token-" + std::to_string(++tokens_), Clock::now() + ttl};
    return std::optional<Token>(lease.token);
  }

  cache::RemoteResult<bool> renew(const cache::RecordKey &record, const Token &token,
                                  std::chrono::milliseconds ttl) override {
    if (auto fault = injected())
      return *fault;
    std::lock_guard lock(mutex_);
    Lease *lease = held(record, token);
    if (lease)
      lease->expires = Clock::now() + ttl;
    return lease != nullptr;
  }

  cache::RemoteResult<bool> release(const cache::RecordKey &record, const Token &token) override {
    if (auto fault = injected())
      return *fault;
    std::lock_guard lock(mutex_);
    Lease *lease = held(record, token);
    if (lease)
      *lease = {};
    return lease != nullptr;
  }

  cache::RemoteResult<std::size_t>
  scan(cache::RecordKind kind,
       const std::function<void(const cache::RecordKey &)> &visit) override {
    if (auto fault = injected())
      return *fault;
    std::vector<cache::RecordKey> found;
    {
      std::lock_guard lock(mutex_);
      for (const auto &[name, value] : values_)
        if (auto record = cache::parse_storage_name(name, kind))
          found.push_back(*record);
    }
    for (const auto &record : found)
      visit(record);
    return found.size();
  }

private:
  using Clock = std::chrono::steady_clock;
  struct Lease {
    Token token;
    Clock::time_point expires;
  };

  std::optional<cache::RemoteFault> injected() {
    std::chrono::milliseconds each;
    cache::RemoteTimeouts timeouts;
    {
      std::lock_guard lock(mutex_);
      if (fault_)
        return fault_;
      each = delay_;
      timeouts = timeouts_;
    }
    if (each > timeouts.operation) {
      std::this_thread::sleep_for(timeouts.operation);
      return cache::RemoteFault{cache::RemoteFailure::timeout, "fake remote: operation timed out"};
    }
    std::this_thread::sleep_for(each);
    return std::nullopt;
  }

  Lease *held(const cache::RecordKey &record, const Token &token) {
    auto found = leases_.find(cache::lease_name(record));
    if (found == leases_.end() || found->second.token != token ||
        Clock::now() >= found->second.expires)
      return nullptr;
    return &found->second;
  }

  mutable std::mutex mutex_;
  std::map<std::string, std::vector<std::byte>> values_;
  std::map<std::string, Lease> leases_;
  std::optional<cache::RemoteFault> fault_;
  std::chrono::milliseconds delay_{0};
  cache::RemoteTimeouts timeouts_;
  int tokens_ = 0;
  std::atomic<int> gets_ = 0;
  std::atomic<int> puts_ = 0;
};

namespace detail {

// The fakes fake_remote_url named, by URL without attributes.
struct FakeRemotes {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<FakeRemote>, std::less<>> by_url;
  int named = 0;
};
inline FakeRemotes &fake_remotes() {
  static FakeRemotes fakes;
  return fakes;
}

// The "fake" scheme's backend (cache::OpenRemote): the fake the URL names, read-only with the
// "read-only" attribute.
inline cache::RemoteStorage open_fake_remote(std::string_view url) {
  const std::string_view name = url.substr(0, url.find('|'));
  FakeRemotes &fakes = fake_remotes();
  const std::lock_guard lock(fakes.mutex);
  const std::shared_ptr<FakeRemote> &remote = fakes.by_url.at(std::string(name));
  return {std::string(name), url.ends_with("|read-only"), remote, remote, remote};
}

} // namespace detail

// A URL that opens `remote` in this process, "fake://<n>" ("|read-only" appended when asked): tests
// configure remotes by URL (Config::remote_urls) as users do. Each call names the fake anew, so
// no Config of an earlier test reaches it through kjit's per-process remotes.
inline std::string fake_remote_url(const std::shared_ptr<FakeRemote> &remote,
                                   bool read_only = false) {
  cache::add_remote_scheme({"fake", detail::open_fake_remote});
  detail::FakeRemotes &fakes = detail::fake_remotes();
  const std::lock_guard lock(fakes.mutex);
  std::string url = "fake://" + std::to_string(++fakes.named);
  fakes.by_url[url] = remote;
  return read_only ? url + "|read-only" : url;
}

} // namespace kjit::testing

#pragma once
// Single flight: the first thread to ask for a key makes its value, the others wait for that
// value (or its exception). Values are kept, at a stable address, for the owner's life.
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>

namespace kjit {

template <typename Key, typename Value> class SingleFlight {
public:
  // The value of `key`, made by `make` in this thread unless another thread made it or is making
  // it.
  const Value &get(const Key &key, const std::function<std::unique_ptr<Value>()> &make) {
    std::promise<const Value *> promise;
    std::shared_future<const Value *> pending;
    {
      std::lock_guard lock(mutex_);
      if (auto found = values_.find(key); found != values_.end())
        return *found->second;
      if (auto running = in_flight_.find(key); running != in_flight_.end())
        pending = running->second;
      else
        in_flight_.emplace(key, promise.get_future().share());
    }
    if (pending.valid())
      return *pending.get();
    try {
      std::unique_ptr<Value> value = make();
      std::lock_guard lock(mutex_);
      const Value &stored = *values_.emplace(key, std::move(value)).first->second;
      in_flight_.erase(key);
      promise.set_value(&stored);
      return stored;
    } catch (...) {
      std::lock_guard lock(mutex_);
      in_flight_.erase(key);
      promise.set_exception(std::current_exception());
      throw;
    }
  }

  // Whether a value is kept under a key from `first` on for which `same` holds (keys sort so that
  // those `same` accepts follow `first`).
  bool holds(const Key &first, const std::function<bool(const Key &)> &same) const {
    std::lock_guard lock(mutex_);
    auto at = values_.lower_bound(first);
    return at != values_.end() && same(at->first);
  }

private:
  mutable std::mutex mutex_;
  std::map<Key, std::unique_ptr<Value>> values_;
  std::map<Key, std::shared_future<const Value *>> in_flight_;
};

} // namespace kjit

#pragma once
// What one Runtime did, for Runtime::counters() and, at its end, the cache's statistics. Updated on
// the slow path only (one update per disk access or compile), under a mutex.
#include "kjit/cache/stats.hpp"
#include "kjit/runtime/runtime.hpp"

#include <mutex>

namespace kjit {

class RuntimeCounters {
public:
  // A variant served from a tier (`origin` is not Origin::compiled), whose entry records that its
  // compile took `saved_ms`.
  void hit(Origin origin, double saved_ms) {
    std::lock_guard lock(mutex_);
    ++(origin == Origin::prebuilt ? counters_.prebuilt_hits
       : origin == Origin::remote ? counters_.remote_hits
                                  : counters_.user_hits);
    counters_.saved_ms += saved_ms;
  }
  // A variant in no tier, about to be compiled.
  void miss() {
    std::lock_guard lock(mutex_);
    ++counters_.misses;
  }
  void compiled(double compile_ms) {
    std::lock_guard lock(mutex_);
    ++counters_.compiles;
    counters_.compile_ms += compile_ms;
  }

  Runtime::Counters summary() const {
    std::lock_guard lock(mutex_);
    return {counters_.compiles, counters_.user_hits, counters_.prebuilt_hits,
            counters_.remote_hits};
  }
  cache::CacheCounters totals() const {
    std::lock_guard lock(mutex_);
    return counters_;
  }

private:
  mutable std::mutex mutex_;
  cache::CacheCounters counters_;
};

} // namespace kjit

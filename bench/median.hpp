#pragma once
// The statistic the benchmarks report of repeated timings.
#include <algorithm>
#include <vector>

namespace kjit::bench {

// The middle of `values` (sorted here; of an even count, the upper of the two middle values).
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace kjit::bench

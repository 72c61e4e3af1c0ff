#include "kjit/ops/softmax.hpp"

#include "launch.hpp"

#include <algorithm>
#include <cmath>

namespace kjit::ops {

template <Element T>
void softmax(Runtime &rt, T *out, const T *x, float scale, int rows, int cols, int causal_queries,
             Stream stream) {
  constexpr std::string_view op = "softmax";
  detail::require_pointer(out, op, "out");
  detail::require_pointer(x, op, "x");
  detail::require(rows >= 0, op,
                  [&] { return "rows is " + std::to_string(rows) + ", must be >= 0"; });
  detail::require_range(cols, 1, detail::max_row_length, op, "cols");
  detail::require(std::isfinite(scale), op,
                  [&] { return "scale is " + std::to_string(scale) + ", not finite"; });
  detail::require(
      causal_queries >= 0 && (causal_queries == 0 || rows % causal_queries == 0), op, [&] {
        return "causal_queries is " + std::to_string(causal_queries) +
               ", must be 0 (no mask) or a positive divisor of rows (" + std::to_string(rows) + ")";
      });
  if (rows == 0)
    return;
  detail::launch_rowwise<T>(rt, detail::softmax_kernel, rows, cols, {out, x}, stream, out, x, scale,
                            rows, causal_queries);
}

template void softmax<float>(Runtime &, float *, const float *, float, int, int, int, Stream);
template void softmax<Half>(Runtime &, Half *, const Half *, float, int, int, int, Stream);
template void softmax<BFloat16>(Runtime &, BFloat16 *, const BFloat16 *, float, int, int, int,
                                Stream);

namespace reference {

std::vector<double> softmax(std::span<const double> x, double scale, int rows, int cols,
                            int causal_queries) {
  std::vector<double> out(x.size(), 0.0);
  for (int r = 0; r < rows; ++r) {
    const int visible = causal_queries > 0
                            ? std::clamp(r % causal_queries + cols - causal_queries + 1, 0, cols)
                            : cols;
    if (visible == 0)
      continue;
    const double *row = x.data() + static_cast<std::size_t>(r) * cols;
    double *result = out.data() + static_cast<std::size_t>(r) * cols;
    double maximum = -INFINITY;
    for (int i = 0; i < visible; ++i)
      maximum = std::max(maximum, scale * row[i]);
    double total = 0;
    for (int i = 0; i < visible; ++i)
      total += result[i] = std::exp(scale * row[i] - maximum);
    for (int i = 0; i < visible; ++i)
      result[i] /= total;
  }
  return out;
}

} // namespace reference

} // namespace kjit::ops

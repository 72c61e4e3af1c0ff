#pragma once
// Row normalisations over `rows` rows of `hidden` contiguous elements (row-major [rows, hidden]),
// computed in float and rounded once to T. Each throws Error(bad_argument) for a null pointer,
// rows < 0, hidden outside [1, 32768] or eps negative or NaN; what Runtime::kernel throws; and
// nothing else. rows == 0 launches nothing. Asynchronous on `stream` (nullptr: the default one)
// of the Runtime's default device, where every pointer must live.
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <span>
#include <vector>

namespace kjit::ops {

// out[r, i] = x[r, i] / sqrt(mean_j x[r, j]^2 + eps) * weight[i]. out may be x.
template <Element T>
void rms_norm(Runtime &rt, T *out, const T *x, const T *weight, float eps, int rows, int hidden,
              Stream stream = nullptr);

// vLLM's fused_add_rms_norm, in place: residual = x + residual (rounded to T), then
// x = rms_norm(residual) * weight. x and residual must not overlap.
template <Element T>
void fused_add_rms_norm(Runtime &rt, T *x, T *residual, const T *weight, float eps, int rows,
                        int hidden, Stream stream = nullptr);

// out[r, i] = (x[r, i] - mean) / sqrt(variance + eps) * weight[i] + bias[i], with the row's mean
// and biased variance (torch's F.layer_norm). out may be x.
template <Element T>
void layer_norm(Runtime &rt, T *out, const T *x, const T *weight, const T *bias, float eps,
                int rows, int hidden, Stream stream = nullptr);

// The same operators in double precision, on the host: what the tests compare with.
namespace reference {

std::vector<double> rms_norm(std::span<const double> x, std::span<const double> weight, double eps,
                             int rows, int hidden);

std::vector<double> layer_norm(std::span<const double> x, std::span<const double> weight,
                               std::span<const double> bias, double eps, int rows, int hidden);

struct FusedAddRmsNorm {
  std::vector<double> out;      // what x holds afterwards
  std::vector<double> residual; // what residual holds afterwards: x + residual rounded to T
};
template <Element T>
FusedAddRmsNorm fused_add_rms_norm(std::span<const double> x, std::span<const double> residual,
                                   std::span<const double> weight, double eps, int rows,
                                   int hidden) {
  FusedAddRmsNorm result;
  result.residual.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    result.residual[i] = to_double(from_double<T>(x[i] + residual[i]));
  result.out = rms_norm(result.residual, weight, eps, rows, hidden);
  return result;
}

} // namespace reference

} // namespace kjit::ops

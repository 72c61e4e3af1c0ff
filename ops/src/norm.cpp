#include "kjit/ops/norm.hpp"

#include "launch.hpp"

#include <cmath>

namespace kjit::ops {

namespace {

// What every norm checks before it launches.
void check_norm(std::string_view op, int rows, int hidden, float eps,
                std::initializer_list<std::pair<const void *, const char *>> pointers) {
  for (const auto &[pointer, name] : pointers)
    detail::require_pointer(pointer, op, name);
  detail::require(rows >= 0, op,
                  [&] { return "rows is " + std::to_string(rows) + ", must be >= 0"; });
  detail::require_range(hidden, 1, detail::max_row_length, op, "hidden");
  detail::require(eps >= 0.0f, op,
                  [&] { return "eps is " + std::to_string(eps) + ", must be >= 0"; });
}

} // namespace

template <Element T>
void rms_norm(Runtime &rt, T *out, const T *x, const T *weight, float eps, int rows, int hidden,
              Stream stream) {
  check_norm("rms_norm", rows, hidden, eps, {{out, "out"}, {x, "x"}, {weight, "weight"}});
  if (rows == 0)
    return;
  detail::launch_rowwise<T>(rt, detail::rms_norm_kernel, rows, hidden, {out, x, weight}, stream,
                            out, x, weight, eps, rows);
}

template <Element T>
void fused_add_rms_norm(Runtime &rt, T *x, T *residual, const T *weight, float eps, int rows,
                        int hidden, Stream stream) {
  constexpr std::string_view op = "fused_add_rms_norm";
  check_norm(op, rows, hidden, eps, {{x, "x"}, {residual, "residual"}, {weight, "weight"}});
  if (rows == 0)
    return;
  const std::size_t bytes = static_cast<std::size_t>(rows) * hidden * sizeof(T);
  detail::require_disjoint(x, bytes, residual, bytes, op, "x and residual");
  detail::launch_rowwise<T>(rt, detail::fused_add_rms_norm_kernel, rows, hidden,
                            {x, residual, weight}, stream, x, residual, weight, eps, rows);
}

template <Element T>
void layer_norm(Runtime &rt, T *out, const T *x, const T *weight, const T *bias, float eps,
                int rows, int hidden, Stream stream) {
  check_norm("layer_norm", rows, hidden, eps,
             {{out, "out"}, {x, "x"}, {weight, "weight"}, {bias, "bias"}});
  if (rows == 0)
    return;
  detail::launch_rowwise<T>(rt, detail::layer_norm_kernel, rows, hidden, {out, x, weight, bias},
                            stream, out, x, weight, bias, eps, rows);
}

#define KJIT_INSTANTIATE_NORMS(T)                                                                  \
  template void rms_norm<T>(Runtime &, T *, const T *, const T *, float, int, int, Stream);        \
  template void fused_add_rms_norm<T>(Runtime &, T *, T *, const T *, float, int, int, Stream);    \
  template void layer_norm<T>(Runtime &, T *, const T *, const T *, const T *, float, int, int,    \
                              Stream);
KJIT_INSTANTIATE_NORMS(float)
KJIT_INSTANTIATE_NORMS(Half)
KJIT_INSTANTIATE_NORMS(BFloat16)
#undef KJIT_INSTANTIATE_NORMS

namespace reference {

std::vector<double> rms_norm(std::span<const double> x, std::span<const double> weight, double eps,
                             int rows, int hidden) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const double *row = x.data() + static_cast<std::size_t>(r) * hidden;
    double squares = 0;
    for (int i = 0; i < hidden; ++i)
      squares += row[i] * row[i];
    const double scale = 1.0 / std::sqrt(squares / hidden + eps);
    for (int i = 0; i < hidden; ++i)
      out[static_cast<std::size_t>(r) * hidden + i] = row[i] * scale * weight[i];
  }
  return out;
}

std::vector<double> layer_norm(std::span<const double> x, std::span<const double> weight,
                               std::span<const double> bias, double eps, int rows, int hidden) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    const double *row = x.data() + static_cast<std::size_t>(r) * hidden;
    double sum = 0;
    for (int i = 0; i < hidden; ++i)
      sum += row[i];
    const double mean = sum / hidden;
    double squares = 0;
    for (int i = 0; i < hidden; ++i)
      squares += (row[i] - mean) * (row[i] - mean);
    const double scale = 1.0 / std::sqrt(squares / hidden + eps);
    for (int i = 0; i < hidden; ++i)
      out[static_cast<std::size_t>(r) * hidden + i] = (row[i] - mean) * scale * weight[i] + bias[i];
  }
  return out;
}

} // namespace reference

} // namespace kjit::ops

#include "kjit/ops/activation.hpp"

#include "launch.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kjit::ops {

namespace {

template <Element T>
void activation(Runtime &rt, std::string_view op, T *out, const T *x, std::int64_t n,
                Stream stream) {
  detail::require_pointer(out, op, "out");
  detail::require_pointer(x, op, "x");
  detail::require(n >= 0, op, [&] { return "n is " + std::to_string(n) + ", must be >= 0"; });
  if (n == 0)
    return;
  const detail::ChosenVariant variant = detail::activation_variant(op, out, x);
  const std::int64_t blocks = detail::activation_blocks(n, variant.integer("VEC"));
  detail::require(blocks <= std::numeric_limits<int>::max(), op,
                  [&] { return "n is " + std::to_string(n) + ", more than one launch covers"; });
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  kernel.launch({.grid = static_cast<unsigned>(blocks),
                 .block = detail::activation_threads,
                 .stream = stream},
                out, x, static_cast<long long>(n));
}

// A gated operator: its name for messages and its activation.
struct GatedOp {
  std::string_view name;
  std::string_view act;
};
constexpr GatedOp silu_and_mul_op{"silu_and_mul", "silu"};
constexpr GatedOp gelu_and_mul_op{"gelu_and_mul", "gelu"};
constexpr GatedOp gelu_tanh_and_mul_op{"gelu_tanh_and_mul", "gelu_tanh"};

// The gated plan: the tuned VEC when the table has one the pointers allow, else the widest they
// allow.
detail::Plan choose_gated_plan(Runtime &rt, const GatedOp &op, std::string_view element, int rows,
                               int d, int aligned_vec) {
  static const Template &tmpl = templates::find("gated_activation");
  const ParamValues problem = {{"ACT", op.act}, {"T", element}};
  int vec = aligned_vec;
  if (auto winner =
          detail::tuned_winner(rt, tmpl, problem, {{"d", d}, {"rows", detail::rows_bucket(rows)}}))
    if (const int tuned = detail::winner_value(*winner, "VEC", 0); tuned >= 1 && tuned <= vec)
      vec = tuned;
  ParamValues params = problem;
  params.add("VEC", vec);
  return {&rt.kernel(tmpl, params), vec, detail::activation_threads, 1};
}

template <Element T>
void gated(Runtime &rt, const GatedOp &op, T *out, const T *x, int rows, int d, Stream stream) {
  detail::require_pointer(out, op.name, "out");
  detail::require_pointer(x, op.name, "x");
  detail::require(rows >= 0, op.name,
                  [&] { return "rows is " + std::to_string(rows) + ", must be >= 0"; });
  detail::require_range(d, 1, std::numeric_limits<int>::max() / 2, op.name, "d");
  if (rows == 0)
    return;
  const std::size_t out_bytes = static_cast<std::size_t>(rows) * d * sizeof(T);
  detail::require_disjoint(out, out_bytes, x, 2 * out_bytes, op.name, "out and x");
  const int aligned = detail::vector_width(sizeof(T), d, {out, x});
  const detail::PlanKey key = detail::plan_key<T>(rt.id(), &op, d, rows, aligned);
  const detail::Plan *plan = detail::find_plan(key);
  if (plan == nullptr) [[unlikely]]
    plan =
        &detail::remember_plan(key, choose_gated_plan(rt, op, element_name<T>(), rows, d, aligned));
  detail::launch_gated(*plan->kernel, plan->vec, out, x, sizeof(T), rows, d, stream);
}

} // namespace

namespace detail {

void launch_gated(const Kernel &kernel, int vec, void *out, const void *x,
                  std::size_t element_bytes, int rows, int d, Stream stream) {
  const int rows_per_launch = gated_rows_per_launch(d, vec);
  for (int first = 0; first < rows;) {
    const int count = std::min(rows_per_launch, rows - first);
    const std::int64_t elements = std::int64_t{count} * d;
    void *out_rows = static_cast<std::byte *>(out) + std::int64_t{first} * d * element_bytes;
    const void *x_rows =
        static_cast<const std::byte *>(x) + std::int64_t{first} * 2 * d * element_bytes;
    kernel.launch({.grid = static_cast<unsigned>(activation_blocks(elements, vec)),
                   .block = activation_threads,
                   .stream = stream},
                  out_rows, x_rows, d, static_cast<int>(elements / vec));
    first += count;
  }
}

template <Element T>
ChosenVariant activation_variant(std::string_view act, const T *out, const T *x) {
  static const Template &tmpl = templates::find("activation");
  return {&tmpl,
          {{"ACT", act}, {"T", element_name<T>()}, {"VEC", vector_width(sizeof(T), {out, x})}}};
}

template <Element T>
ChosenVariant gated_variant(std::string_view act, int d, const T *out, const T *x) {
  static const Template &tmpl = templates::find("gated_activation");
  return {&tmpl,
          {{"ACT", act}, {"T", element_name<T>()}, {"VEC", vector_width(sizeof(T), d, {out, x})}}};
}

} // namespace detail

template <Element T> void silu(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream) {
  activation(rt, "silu", out, x, n, stream);
}
template <Element T> void gelu(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream) {
  activation(rt, "gelu", out, x, n, stream);
}
template <Element T>
void gelu_tanh(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream) {
  activation(rt, "gelu_tanh", out, x, n, stream);
}
template <Element T> void relu(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream) {
  activation(rt, "relu", out, x, n, stream);
}
template <Element T> void sigmoid(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream) {
  activation(rt, "sigmoid", out, x, n, stream);
}

template <Element T>
void silu_and_mul(Runtime &rt, T *out, const T *x, int rows, int d, Stream stream) {
  gated(rt, silu_and_mul_op, out, x, rows, d, stream);
}
template <Element T>
void gelu_and_mul(Runtime &rt, T *out, const T *x, int rows, int d, Stream stream) {
  gated(rt, gelu_and_mul_op, out, x, rows, d, stream);
}
template <Element T>
void gelu_tanh_and_mul(Runtime &rt, T *out, const T *x, int rows, int d, Stream stream) {
  gated(rt, gelu_tanh_and_mul_op, out, x, rows, d, stream);
}

#define KJIT_INSTANTIATE_ACTIVATIONS(T)                                                            \
  template void silu<T>(Runtime &, T *, const T *, std::int64_t, Stream);                          \
  template void gelu<T>(Runtime &, T *, const T *, std::int64_t, Stream);                          \
  template void gelu_tanh<T>(Runtime &, T *, const T *, std::int64_t, Stream);                     \
  template void relu<T>(Runtime &, T *, const T *, std::int64_t, Stream);                          \
  template void sigmoid<T>(Runtime &, T *, const T *, std::int64_t, Stream);                       \
  template void silu_and_mul<T>(Runtime &, T *, const T *, int, int, Stream);                      \
  template void gelu_and_mul<T>(Runtime &, T *, const T *, int, int, Stream);                      \
  template void gelu_tanh_and_mul<T>(Runtime &, T *, const T *, int, int, Stream);                 \
  template detail::ChosenVariant detail::activation_variant<T>(std::string_view, const T *,        \
                                                               const T *);                         \
  template detail::ChosenVariant detail::gated_variant<T>(std::string_view, int, const T *,        \
                                                          const T *);
KJIT_INSTANTIATE_ACTIVATIONS(float)
KJIT_INSTANTIATE_ACTIVATIONS(Half)
KJIT_INSTANTIATE_ACTIVATIONS(BFloat16)
#undef KJIT_INSTANTIATE_ACTIVATIONS

namespace reference {

double silu(double x) { return x * sigmoid(x); }
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  const double sqrt_2_over_pi = 0.79788456080286535588;
  return 0.5 * x * (1.0 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x)));
}
double relu(double x) { return x < 0 ? 0.0 : x; }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<double> gated(double (*f)(double), std::span<const double> x, int rows, int d) {
  std::vector<double> out(static_cast<std::size_t>(rows) * d);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < d; ++i) {
      const double *row = x.data() + static_cast<std::size_t>(r) * 2 * d;
      out[static_cast<std::size_t>(r) * d + i] = f(row[i]) * row[d + i];
    }
  return out;
}

} // namespace reference

} // namespace kjit::ops

#include "launch.hpp"

namespace kjit::ops::detail {

void throw_bad_argument(std::string_view op, std::string_view what) {
  throw Error(Errc::bad_argument, "kjit::ops::" + std::string(op) + ": " + std::string(what));
}

void require_pointer(const void *pointer, std::string_view op, std::string_view name) {
  require(pointer != nullptr, op, [&] { return std::string(name) + " is null"; });
}

void require_range(std::int64_t value, std::int64_t min, std::int64_t max, std::string_view op,
                   std::string_view name) {
  require(value >= min && value <= max, op, [&] {
    return std::string(name) + " is " + std::to_string(value) + ", must be in [" +
           std::to_string(min) + ", " + std::to_string(max) + "]";
  });
}

void require_disjoint(const void *a, std::size_t a_bytes, const void *b, std::size_t b_bytes,
                      std::string_view op, std::string_view names) {
  const auto first = reinterpret_cast<std::uintptr_t>(a);
  const auto second = reinterpret_cast<std::uintptr_t>(b);
  require(first + a_bytes <= second || second + b_bytes <= first, op,
          [&] { return std::string(names) + " overlap"; });
}

int nvidia_compute_capability(const jit::Target &target) {
  if (target.vendor() != Vendor::nvidia)
    return 0;
  const std::string &arch = target.arch(); // "sm_" then the digits
  int capability = 0;
  for (std::size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i)
    capability = capability * 10 + (arch[i] - '0');
  return capability;
}

int vector_width(std::size_t element_bytes, std::initializer_list<const void *> pointers) {
  int width = static_cast<int>(16 / element_bytes);
  for (const void *pointer : pointers)
    while (width > 1 && !aligned(pointer, element_bytes * width))
      width /= 2;
  return width;
}

int vector_width(std::size_t element_bytes, std::int64_t length,
                 std::initializer_list<const void *> pointers) {
  int width = vector_width(element_bytes, pointers);
  while (length % width != 0)
    width /= 2;
  return width;
}

RowShape row_shape(std::size_t element_bytes, int length, int warp_size,
                   std::initializer_list<const void *> pointers) {
  return row_shape(vector_width(element_bytes, length, pointers), length, warp_size);
}

RowShape choose_row_shape(const RowShape &heuristic, const std::optional<TimedVariant> &winner,
                          int aligned_vec, int warp_size) {
  if (!winner)
    return heuristic;
  const int vec = winner_value(*winner, "VEC", 0);
  const int threads = winner_value(*winner, "THREADS", 0);
  if (vec < 1 || vec > aligned_vec || threads < 1)
    return heuristic;
  return {vec, threads, threads <= warp_size ? std::max(1, 256 / threads) : 1};
}

Plan choose_rowwise_plan(Runtime &rt, const RowwiseKernel &op, std::string_view element, int rows,
                         int length, int aligned_vec) {
  const Template &tmpl = templates::find(op.name);
  const int warp = rt.default_device().target().warp_size();
  const ParamValues problem = {{"T", element}, {op.length_param, length}};
  const RowShape shape = choose_row_shape(
      row_shape(aligned_vec, length, warp),
      tuned_winner(rt, tmpl, problem, {{"rows", rows_bucket(rows)}}), aligned_vec, warp);
  ParamValues params = problem;
  params.add("VEC", shape.vec);
  params.add("THREADS", shape.threads);
  return {&rt.kernel(tmpl, params), shape.vec, shape.threads, shape.rows_per_block};
}

} // namespace kjit::ops::detail

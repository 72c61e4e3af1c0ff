#pragma once
// What the operators share: argument checks that throw one clear Error(bad_argument), and the
// launch shapes picked from the row length, the pointers' alignment and the device's target.
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/templates/library.hpp"
#include "plans.hpp"
#include "variants.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

namespace kjit::ops::detail {

// Throws Error(bad_argument) "kjit::ops::<op>: <what>".
[[noreturn]] void throw_bad_argument(std::string_view op, std::string_view what);
// Throws Error(bad_argument) "kjit::ops::<op>: <what>" unless `condition`. `what` is the message
// or a callable that makes it, called only when the check fails: the checks run on every launch,
// and formatting their messages up front would cost each call more than the launch's own host
// work (BENCHMARKS.md, "Evidence behind the code's choices").
template <typename What> void require(bool condition, std::string_view op, const What &what) {
  if (condition)
    return;
  if constexpr (std::is_invocable_v<const What &>)
    throw_bad_argument(op, what());
  else
    throw_bad_argument(op, what);
}
// Throws unless `pointer` is set: "kjit::ops::rms_norm: weight is null".
void require_pointer(const void *pointer, std::string_view op, std::string_view name);
// Throws unless `value` lies in [min, max]: "kjit::ops::rms_norm: hidden is 0, must be in
// [1, 32768]".
void require_range(std::int64_t value, std::int64_t min, std::int64_t max, std::string_view op,
                   std::string_view name);
// Throws unless the byte ranges [a, a + a_bytes) and [b, b + b_bytes) are disjoint.
void require_disjoint(const void *a, std::size_t a_bytes, const void *b, std::size_t b_bytes,
                      std::string_view op, std::string_view names);

// Whether `pointer` is a multiple of `bytes`.
inline bool aligned(const void *pointer, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(pointer) % bytes == 0;
}

constexpr int divide_up(int x, int by) { return (x + by - 1) / by; }

// The compute capability of an NVIDIA target as a number ("sm_89" 89, "sm_90a" 90); 0 for AMD.
int nvidia_compute_capability(const jit::Target &target);

// The widest vector (in elements, at most 16 bytes) whose accesses are aligned: every pointer is
// a multiple of its byte size. 1 when nothing wider fits. For one flat array.
int vector_width(std::size_t element_bytes, std::initializer_list<const void *> pointers);
// The same for arrays of rows of `length` elements: every row must start aligned, so the width
// also divides `length`.
int vector_width(std::size_t element_bytes, std::int64_t length,
                 std::initializer_list<const void *> pointers);

// The shape of a row-wise launch (templates rowwise.hip): VEC elements per access, THREADS per
// row (a power of two, at least the warp, enough that each thread holds about four vectors) and
// rows per block (several when a row takes at most one warp, so that a block has 256 threads).
struct RowShape {
  int vec;
  int threads;
  int rows_per_block;
};
// For rows accessed `vec` elements at a time.
constexpr RowShape row_shape(int vec, int length, int warp_size) {
  // About four vectors per thread: four independent 16-byte loads in flight each, with the
  // reduction's cost spread over enough elements. The template holds at most 64 elements per
  // thread: 1024 threads and 32768 elements give at most 32 + VEC.
  constexpr int vectors_per_thread = 4;
  const int wanted = (length / vec + vectors_per_thread - 1) / vectors_per_thread;
  const int threads =
      std::clamp(static_cast<int>(std::bit_ceil(static_cast<unsigned>(wanted))), warp_size, 1024);
  const int rows_per_block = threads <= warp_size ? std::max(1, 256 / threads) : 1;
  return {vec, threads, rows_per_block};
}
// For rows at these pointers: the widest aligned vector_width.
RowShape row_shape(std::size_t element_bytes, int length, int warp_size,
                   std::initializer_list<const void *> pointers);

// The activations' launch (templates `activation` and `gated_activation`): blocks of 256
// threads, each thread taking `activation_unroll` vectors of `vec` elements of the output.
inline constexpr int activation_threads = 256;
inline constexpr int activation_unroll = 2; // the templates' UNROLL
constexpr std::int64_t activation_blocks(std::int64_t n, int vec) {
  const std::int64_t per_block = std::int64_t{activation_threads} * activation_unroll * vec;
  return (n + per_block - 1) / per_block;
}
// The rows of d elements one `gated_activation` launch takes: its vectors are counted in 32-bit
// integers, below 2^31 with a block's worth to spare.
constexpr int gated_rows_per_launch(int d, int vec) {
  constexpr std::int64_t max_vectors = (std::int64_t{1} << 31) - (1 << 16);
  return static_cast<int>(max_vectors / (d / vec)); // d < 2^30: at least one row
}

// Launches the gated template's `kernel` (vectors of `vec`) over `rows` rows of d outputs, in as
// many launches as gated_rows_per_launch needs. `element_bytes`: the size of one element.
void launch_gated(const Kernel &kernel, int vec, void *out, const void *x,
                  std::size_t element_bytes, int rows, int d, Stream stream);

// The longest row the row-wise templates take (their HIDDEN/COLS parameter's maximum).
inline constexpr int max_row_length = 32768;

// A row-wise operator: its template and the name of the template's row length parameter.
struct RowwiseKernel {
  std::string_view name;
  const char *length_param;
};
inline constexpr RowwiseKernel rms_norm_kernel{"rms_norm", "HIDDEN"};
inline constexpr RowwiseKernel fused_add_rms_norm_kernel{"fused_add_rms_norm", "HIDDEN"};
inline constexpr RowwiseKernel layer_norm_kernel{"layer_norm", "HIDDEN"};
inline constexpr RowwiseKernel softmax_kernel{"softmax", "COLS"};

// The variant of `op` for T and rows of `length` elements, and the shape it launches with.
struct RowwiseVariant {
  ChosenVariant variant;
  RowShape shape;
};
template <Element T>
RowwiseVariant rowwise_variant(const RowwiseKernel &op, int length, int warp_size,
                               std::initializer_list<const void *> pointers) {
  const RowShape shape = row_shape(sizeof(T), length, warp_size, pointers);
  return {{&templates::find(op.name),
           {{"T", element_name<T>()},
            {op.length_param, length},
            {"VEC", shape.vec},
            {"THREADS", shape.threads}}},
          shape};
}

// The shape to launch with: the tuned winner's VEC and THREADS when there is a winner and the
// pointers allow its vector width (`aligned_vec`, a power of two dividing the row), else
// `heuristic`.
RowShape choose_row_shape(const RowShape &heuristic, const std::optional<TimedVariant> &winner,
                          int aligned_vec, int warp_size);

// The plan for `rows` rows of `length` elements of `element` ("half") at pointers that allow
// vectors of `aligned_vec`: chosen (the table, else the heuristic) and compiled.
Plan choose_rowwise_plan(Runtime &rt, const RowwiseKernel &op, std::string_view element, int rows,
                         int length, int aligned_vec);

// Launches the row-wise template of `op` for T and rows of `length` elements over `rows` rows
// with `args`, through this thread's plan for the shape (chosen and compiled on its first use).
template <Element T, typename... Args>
void launch_rowwise(Runtime &rt, const RowwiseKernel &op, int rows, int length,
                    std::initializer_list<const void *> pointers, Stream stream,
                    const Args &...args) {
  const int aligned = vector_width(sizeof(T), length, pointers);
  const PlanKey key = plan_key<T>(rt.id(), &op, length, rows, aligned);
  const Plan *plan = find_plan(key);
  if (plan == nullptr) [[unlikely]]
    plan =
        &remember_plan(key, choose_rowwise_plan(rt, op, element_name<T>(), rows, length, aligned));
  const unsigned blocks =
      static_cast<unsigned>((rows + plan->rows_per_block - 1) / plan->rows_per_block);
  plan->kernel->launch({.grid = blocks,
                        .block = Dim3(static_cast<unsigned>(plan->threads),
                                      static_cast<unsigned>(plan->rows_per_block)),
                        .stream = stream},
                       args...);
}

} // namespace kjit::ops::detail

#pragma once
// The variant (a built-in template and its parameter values) each operator asks the runtime for:
// pure functions of the shapes, the pointers' alignment and the target's warp size. The wrappers
// compile and launch exactly what these return, and tests/ops/variants_in_sets_test.cpp checks
// that the prebuilt sets (templates/sets/*.json) hold it for the shapes the sets promise.
#include "kjit/ops/element.hpp"
#include "kjit/ops/gemm.hpp"
#include "kjit/ops/rotary.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/library.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace kjit::ops::detail {

struct TuningLookup; // plans.hpp

struct ChosenVariant {
  const Template *tmpl;
  ParamValues params;

  // An integer parameter's value, for the launch geometry that follows from it ("VEC"). Throws
  // Error(bad_parameter) when `params` has none of that name.
  int integer(std::string_view name) const { return static_cast<int>(params.get(name).integer()); }
};

// The most shared memory a block may ask for on sm_90 (227 KiB).
inline constexpr std::int64_t sm90_shared_bytes = 227 * 1024;

// Sets `variant`'s STAGES to the first of `stages` (deepest first) whose shared memory, as its
// template counts it, fits sm90_shared_bytes; to the last where none does.
void set_deepest_fitting_stages(ChosenVariant &variant, std::initializer_list<int> stages);

// An elementwise activation `act` ("silu") from x into out (flat arrays).
template <Element T>
ChosenVariant activation_variant(std::string_view act, const T *out, const T *x);
// A gated activation `act` ("silu"): rows of 2 * d elements of x into rows of d of out.
template <Element T>
ChosenVariant gated_variant(std::string_view act, int d, const T *out, const T *x);
// Per-token quantisation of rows of `hidden`: `template_name` is
// "dynamic_per_token_quant_int8" or "dynamic_per_token_quant_fp8".
template <Element T>
ChosenVariant quant_variant(std::string_view template_name, int hidden, const void *out,
                            const T *input);
template <Element T>
ChosenVariant rotary_variant(int head_size, int rotary_dim, RotaryStyle style, const T *query,
                             const T *key, const T *cos_sin_cache);
// gemm() on tensor cores (where gemm_has_tensor_cores<T>), for C of m x n.
template <Element T> ChosenVariant gemm_mma_variant(int m, int n);
// The same on AMD matrix cores (gfx942, gfx950).
template <Element T> ChosenVariant gemm_mfma_variant(int m, int n);
// gemm() (b_kmajor false) or linear() (true) on Hopper, where gemm_wgmma_serves.
template <Element T> ChosenVariant gemm_wgmma_variant(int m, int n, int k, bool b_kmajor);
// Launches `variant` of gemm_wgmma (gemm_wgmma_variant's, perhaps with SHAPE_M, SHAPE_N or
// SHAPE_K fixed), linear_skinny or linear_splitk (W as B, b_kmajor true) as gemm() (b_kmajor
// false) or linear() would: for tests and benchmarks that compare variants. Throws
// Error(bad_argument) where a fixed size is not the call's.
template <Element T>
void launch_gemm_variant(Runtime &rt, const ChosenVariant &variant, T *c, const T *a, const T *b,
                         int m, int n, int k, bool b_kmajor, Stream stream = nullptr);
template <Element T>
bool gemm_wgmma_serves(const jit::Target &target, const void *c, const void *a, const void *b,
                       int n, int k);
// linear() for at most this many rows of A: the weight-streaming kernel, linear_skinny.
constexpr int linear_skinny_max_m = 64;
template <Element T> ChosenVariant linear_skinny_variant(int m, int n, int k);
// linear() where gemm_wgmma does not serve: linear_skinny up to linear_skinny_rows rows,
// linear_splitk beyond (sm_90 and newer). On sm_90a gemm_wgmma (SWAP_AB, 64-row tiles of W)
// takes every row count: it was 1.1x faster than linear_splitk at 16 rows of 4096-row weights on
// an H100 (BENCHMARKS.md, "linear at 16 to 128 rows with 64-row tiles of W"), and 1.01-1.04x
// faster than linear_skinny at 1 to 8 rows of every measured weight on an H200 ("linear at 64
// and 128 rows on an H200").
constexpr int linear_skinny_rows = 8;
// The heuristic's variant for a GEMM (b_kmajor: linear()'s W) of m rows (bucketed), among the
// kernels that serve it: gemm_wgmma where it serves; else linear_skinny up to linear_skinny_rows
// rows and linear_splitk (sm_90 and newer) beyond, or linear_skinny (sm_80).
template <Element T>
ChosenVariant heuristic_gemm_variant(int m, int n, int k, bool b_kmajor, bool skinny_serves,
                                     bool splitk_serves, bool wgmma_serves);
// linear_splitk (A staged in shared memory, K split over a cluster's blocks) serves at most this
// many rows of A, on sm_90 and newer; a tuning record may choose it up to there.
constexpr int linear_splitk_max_m = 128;
// gemm_wgmma_variant for a K-major B (linear()) computes C's transpose (SWAP_AB) up to this many
// rows of A (BLOCK_N 16 to 128; from 65 rows two tiles of 64 on weights of 4224 rows or fewer
// and K under 8192).
constexpr int swap_ab_max_m = 128;
template <Element T> ChosenVariant linear_splitk_variant(int m, int n, int k);
template <Element T>
bool linear_splitk_serves(const jit::Target &target, const void *c, const void *a, const void *w,
                          int m, int n, int k);
// The extents a GEMM shape's tuning records (linear_skinny's and gemm_wgmma's, problem {T}) are
// kept under: m rounded up to a power of two (rows_bucket), n, k and B's layout.
ParamValues gemm_tuning_extents(int m, int n, int k, bool b_kmajor);
template <Element T>
bool linear_skinny_serves(const jit::Target &target, const void *c, const void *a, const void *w,
                          int m, int n, int k);
// gemm_fp8's heuristic variant for block scales, else row-wise or per-tensor ones.
ChosenVariant gemm_fp8_variant(bool block, bool row_wise, int m, int n);
// The extents the FP8 GEMMs' tuning records (gemm_fp8's and gemm_fp8_mfma's, problem {SCALING})
// are kept under: m rounded up to a power of two (rows_bucket), n and k.
ParamValues fp8_gemm_tuning_extents(int m, int n, int k);
// gemm_fp8's variant on sm_90a for D of m x n x k with SCALING `scaling` (0 per tensor, 1
// row-wise, 2 block scales): the tuning table's winner for the shape, else the heuristic's at
// m's bucket (gemm_fp8_variant).
ChosenVariant gemm_fp8_variant(const TuningLookup &lookup, int scaling, int m, int n, int k);
// Launches `variant` of gemm_fp8 as gemm_fp8_blockscale or gemm_fp8_scaled would, without their
// checks: for tests and benchmarks that compare variants. overlap_previous false launches it
// without the programmatic dependent launch the operators use (to measure what that gives).
void launch_gemm_fp8_variant(Runtime &rt, const ChosenVariant &variant, BFloat16 *d,
                             const std::uint8_t *a, const float *scale_a, const std::uint8_t *b,
                             const float *scale_b, int m, int n, int k, Stream stream = nullptr,
                             bool overlap_previous = true);
// The tensor map of `shape` on `device`, encoded on its first use and kept for the process's life
// (the GEMMs' maps: a warm call encodes none).
TensorMap cached_tensor_map(const Device &device, const TensorMapShape &shape);
// gemm() with these tiles (the portable kernel).
template <Element T> ChosenVariant gemm_variant(const GemmTiles &tiles);

} // namespace kjit::ops::detail

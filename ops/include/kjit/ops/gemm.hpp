#pragma once
// C = A @ B, with A [m, k], B [k, n] and C [m, n] row-major and contiguous (device pointers; the
// layout of torch.matmul on contiguous 2-D tensors). Inputs and output have one element type;
// products accumulate in float, rounded to T once:
//
//   kjit::ops::gemm(rt, c, a, b, m, n, k);
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <span>
#include <vector>

namespace kjit::ops {

// The gemm template's tile shapes: a block computes block_m x block_n of C, staging block_k of
// the reduction at a time; each of its (block_m / thread_m) * (block_n / thread_n) threads holds
// thread_m x thread_n of C in registers.
struct GemmTiles {
  int block_m, block_n, block_k, thread_m, thread_n;
  bool operator==(const GemmTiles &) const = default;
};

// The portable kernel's tiles for these sizes: 128 x 128 blocks where C is large enough to fill
// the device with them, 64 x 64 below.
GemmTiles gemm_tiles_for(int m, int n, int k);

// Whether gemm() without tiles runs on tensor cores for T on `target`: half and bfloat16 on
// NVIDIA sm_80 and newer (the gemm_mma template) and on AMD gfx942 and gfx950 (gemm_mfma, matrix
// cores); otherwise it runs the portable gemm template.
template <Element T> bool gemm_has_tensor_cores(const jit::Target &target);

// The portable kernel (every vendor and type) with these tiles. Throws Error(bad_argument) for
// a non-positive size, a null pointer or tiles whose thread count is outside [32, 1024] or that
// need more than 48 KiB of shared memory; Error(bad_parameter) for a tile size the gemm
// template's schema does not list; what Runtime::kernel throws.
template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, const GemmTiles &tiles,
          Stream stream = nullptr);
// On sm_90a (H100, H200) for half and bfloat16 with n and k multiples of 8 and 16-byte aligned
// matrices: the gemm_wgmma template (wgmma, TMA, a persistent grid), with the tunables of the
// tuning table's gemm_wgmma record for the shape where there is one, else a heuristic's.
// Elsewhere tensor cores where gemm_has_tensor_cores<T>, else the portable kernel with
// gemm_tiles_for.
template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, Stream stream = nullptr);

// C = A @ W^T with W [n, k] row-major, as torch.nn.Linear holds its weight (x @ W^T); A [m, k]
// and C [m, n] as in gemm(). Half and bfloat16, n and k multiples of 8, 16-byte aligned matrices:
// on sm_90a linear_skinny (streams W once) up to 8 rows, linear_splitk (the tokens staged in
// shared memory, K split over a cluster) from 9 to 16 where W has fewer than 8192 rows,
// gemm_wgmma reading W K-major beyond (up to 128 rows computing C's transpose); on
// sm_80 and newer without gemm_wgmma, linear_skinny up to 64 rows (and linear_splitk up to 128 on
// sm_90 and newer). Throws Error(bad_argument) where none serves. Where the tuning table holds
// records for the shape (linear_skinny's, linear_splitk's, gemm_wgmma's), the fastest winner
// runs instead; a record that does not build is logged and ignored. The choice is made once per
// shape (m rounded up to a power of two) and thread.
template <Element T>
void linear(Runtime &rt, T *c, const T *a, const T *w, int m, int n, int k,
            Stream stream = nullptr);

namespace reference {

// A @ B in double precision.
template <Element T>
std::vector<double> gemm(std::span<const T> a, std::span<const T> b, int m, int n, int k);
// A @ W^T in double precision, W [n, k].
template <Element T>
std::vector<double> linear(std::span<const T> a, std::span<const T> w, int m, int n, int k);

} // namespace reference

} // namespace kjit::ops

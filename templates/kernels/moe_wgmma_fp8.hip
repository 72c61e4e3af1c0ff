// fused_moe with e4m3 expert weights and DeepSeek-V3's 128 x 128 block scales, on Hopper tensor
// cores (sm_90a): the activations are quantised to e4m3 per 1 x 128 block of a row
// (moe_quantize_fp8) and the grouped GEMM multiplies e4m3 by e4m3 (moe_gemm_fp8), each 128 of K
// summed apart by wgmma and added to float accumulators times scale_a[row] * scale_b[block]: the
// promotion gemm_fp8.hip's block-scale form makes, here over the sorted rows of all experts.
#if KJIT_HIP
#error "kjit moe_gemm_fp8: fp8 wgmma and TMA are NVIDIA Hopper's (sm_90a)"
#else
#include "kjit/hopper_fp8.h"

// Row r of q [rows, k] (e4m3 bytes) and scales [rows, k / 128]: the 1 x 128 blocks of row r of
// the source, each divided by its scale amax / 448. With sorted_pairs the source row is the token
// row src[sorted_pairs[r] / top_k] (moe_align's sorted pairs; a padding row is zeros, scale 0),
// else src[r]. Rows past the used tiles (totals[0] of 128 rows) are not read by the GEMM and not
// written. A warp per block of 128, four values a lane; k a multiple of 128.
template <typename T>
__global__ void moe_quantize_fp8(unsigned char *KJIT_RESTRICT q, float *KJIT_RESTRICT scales,
                                 const T *KJIT_RESTRICT src, const int *KJIT_RESTRICT sorted_pairs,
                                 const int *KJIT_RESTRICT totals, int top_k, int k) {
  const int row = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int blocks = k / 128, block = blockIdx.y * (blockDim.x / 32) + warp;
  if (row >= totals[0] * 128 || block >= blocks)
    return;
  const int pair = sorted_pairs != nullptr ? sorted_pairs[row] : row;
  const int column = block * 128 + lane * 4;
  float v[4] = {};
  if (pair >= 0) {
    const long long from = sorted_pairs != nullptr ? pair / top_k : pair;
    kjit::to_floats(kjit::load_vec<4>(src + from * k + column), v);
  }
  const float amax = kjit::hopper::warp_amax(
      fmaxf(fmaxf(fabsf(v[0]), fabsf(v[1])), fmaxf(fabsf(v[2]), fabsf(v[3]))));
  *reinterpret_cast<unsigned *>(q + static_cast<long long>(row) * k + column) =
      kjit::hopper::quantize_e4m3x4(v, amax);
  if (lane == 0)
    scales[static_cast<long long>(row) * blocks + block] = amax / 448.0f;
}

// C[r, :] = dequantised A[r, :] @ dequantised W[e(r)]^T, e(r) = block_experts[r / 128], as
// moe_wgmma.hip's moe_gemm_wgmma computes it with GATHER 0, its pipeline and its epilogue, for e4m3
// operands read through tensor maps of bytes (128 x 128 boxes of A, BLOCK_N x 128 of W, one stage
// of 128 K, one swizzle row and one scale block):
//   A [rows, k] e4m3 with scale_a [rows, k / 128] (moe_quantize_fp8's output);
//   GATED 0: W [experts * n, k] with scale_w [experts, n / 128, k / 128]; C [rows, n];
//   GATED 1: W [experts * 2n, k] (w13) with scale_w [experts, 2n / 128, k / 128];
//            C [rows, n] = silu(A @ gate^T) * (A @ up^T).
// n and k are multiples of 128, so a tile's BLOCK_N columns of W (64 gate and 64 up columns when
// gated, 128 otherwise: a wgmma of 128 columns) lie in one block row of scale_w each, and never
// run into the next expert. The promoted sums need a second set of accumulators, hence 128 wgmma
// columns rather than 256 (as gemm_fp8.hip's block-scale form).
template <typename T, int STAGES, int GATED, int GROUP_M>
__global__ void __launch_bounds__(384, 1)
    moe_gemm_fp8(T *KJIT_RESTRICT c, const __grid_constant__ kjit::TensorMap map_a,
                 const __grid_constant__ kjit::TensorMap map_b, const float *KJIT_RESTRICT scale_a,
                 const float *KJIT_RESTRICT scale_w, const int *KJIT_RESTRICT block_experts,
                 const int *KJIT_RESTRICT totals, int n, int k) {
  using namespace kjit::hopper;
  constexpr int BM = 128, BK = 128, WN = 128, BLOCK_N = GATED ? WN / 2 : WN;
  constexpr int A_BYTES = BM * BK, B_BYTES = WN * BK, STAGE = A_BYTES + B_BYTES;
  extern __shared__ unsigned char shared_raw[];
  unsigned char *stages = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull);
  unsigned long long *full = reinterpret_cast<unsigned long long *>(stages + STAGES * STAGE);
  unsigned long long *empty = full + STAGES;

  const int warpgroup = threadIdx.x / 128, thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], 2); // one arrival per consumer
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int tiles_m = totals[0], tiles_n = n / BLOCK_N;
  const int tiles = tiles_m * tiles_n, k_blocks = k / BK;
  const int w_rows = GATED ? 2 * n : n; // one expert's rows of W
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (thread == 0) {
      int s = 0;
      unsigned phase = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tile_m, tile_n;
        place_tile<GROUP_M>(t, tiles_m, tiles_n, tile_m, tile_n);
        const int w_row = block_experts[tile_m] * w_rows + tile_n * BLOCK_N;
        for (int kb = 0; kb < k_blocks; ++kb) {
          barrier_wait(&empty[s], phase ^ 1); // a fresh barrier's previous phase counts as done
          unsigned char *a_stage = stages + s * STAGE, *b_stage = a_stage + A_BYTES;
          barrier_expect_bytes(&full[s], STAGE);
          copy_box(a_stage, &map_a, &full[s], kb * BK, tile_m * BM);
          copy_box(b_stage, &map_b, &full[s], kb * BK, w_row);
          if (GATED) // the up rows of the same columns, after the gate rows
            copy_box(b_stage + BLOCK_N * BK, &map_b, &full[s], kb * BK, w_row + n);
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int rows = (warpgroup - 1) * 64; // this consumer's rows of the tile
    const int warp = thread / 32, lane = thread % 32;
    float acc[WN / 2], part[WN / 2];
    int s = 0;
    unsigned phase = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tile_m, tile_n;
      place_tile<GROUP_M>(t, tiles_m, tiles_n, tile_m, tile_n);
      // Register 4j + 2h + e of m64nNk32 holds row 16 warp + lane / 4 + 8h, column
      // 8j + 2 (lane % 4) + e: gated, columns 0-63 are the gate's, 64-127 the up's.
      const long long row0 = static_cast<long long>(tile_m) * BM + rows + warp * 16 + lane / 4;
      const float *scales_lo = scale_a + row0 * k_blocks;
      const float *scales_hi = scales_lo + 8 * k_blocks;
      const int expert_blocks = block_experts[tile_m] * (w_rows / 128);
      const float *scales_gate =
          scale_w + static_cast<long long>(expert_blocks + tile_n * BLOCK_N / 128) * k_blocks;
      const float *scales_up =
          GATED ? scales_gate + static_cast<long long>(n / 128) * k_blocks : scales_gate;
#pragma unroll
      for (int i = 0; i < WN / 2; ++i)
        acc[i] = 0.0f;
      for (int kb = 0; kb < k_blocks; ++kb) {
        // The scales' loads are in flight while the stage's copies land.
        const float lo = __ldg(scales_lo + kb), hi = __ldg(scales_hi + kb);
        const float gate = __ldg(scales_gate + kb), up = __ldg(scales_up + kb);
        barrier_wait(&full[s], phase);
        const unsigned char *a_stage = stages + s * STAGE + rows * BK;
        const unsigned char *b_stage = stages + s * STAGE + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk)
          WgmmaE4m3<128>::run(part, descriptor(a_stage + kk * 32, 16, 1024),
                              descriptor(b_stage + kk * 32, 16, 1024), kk > 0);
        wgmma_commit();
        wgmma_wait<0>();
        if (thread == 0)
          barrier_arrive(&empty[s]);
#pragma unroll
        for (int i = 0; i < WN / 2; ++i)
          acc[i] += (i % 4 < 2 ? lo : hi) * (i / 4 < BLOCK_N / 8 ? gate : up) * part[i];
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      const int column0 = tile_n * BLOCK_N + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j) {
        const int column = column0 + 8 * j;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
          if (GATED) {
            constexpr int UP = 4 * (BLOCK_N / 8); // the up column's accumulator, past the gate's
            v0 = v0 / (1.0f + __expf(-v0)) * acc[UP + 4 * j + 2 * h];
            v1 = v1 / (1.0f + __expf(-v1)) * acc[UP + 4 * j + 2 * h + 1];
          }
          *reinterpret_cast<typename kjit::Pairs<T>::type *>(c + (row0 + 8 * h) * n + column) =
              kjit::Pairs<T>::pack(v0, v1);
        }
      }
    }
  }
}

#endif

// The grouped GEMM of a mixture-of-experts layer on AMD matrix cores (MFMA: gfx942, gfx950), for
// half and bfloat16, in one launch for every expert: moe_gemm_wgmma's contract (moe_wgmma.hip)
// from plain pointers,
//
//   C[r, :] = A[r, :] @ W[e(r)]^T  for each row r of A, e(r) = block_experts[r / 128]
//
// A [rows, k] holds the token rows sorted by expert, each expert's run padded to 128 rows
// (moe_routing.hip's moe_align and moe_gather), so a 128-row block belongs to one expert;
// totals[0] counts the blocks used, on the device: the grid covers every block the alignment can
// take and the blocks past totals[0] return at once. W holds all experts' weights, nn.Linear's
// layout per expert:
//   GATED 0: W [experts * n, k]; C [rows, n] (the down projection);
//   GATED 1: W [experts * 2n, k], each expert's n gate rows then its n up rows (vLLM's w13);
//            C [rows, n] = silu(A @ gate^T) * (A @ up^T), silu_and_mul in the epilogue.
// A block computes 128 rows x BLOCK_N columns of C with 2 x 2 waves; a gated block stages the
// BLOCK_N gate rows and the BLOCK_N up rows of the same columns and keeps both products, so each
// lane holds gate and up of the same element of C and the epilogue needs no exchange. The weights
// are staged as [n][k], as they lie (K-major), and read as the MFMA's B operand (B(k, col) =
// W(col, k)); the gate and up halves are read as matrices of n rows each, so rows past n are
// zeros, not the next half's. M is whole blocks; N and K need not be multiples of the tiles.
// The MFMA wrappers and their operand and result layouts are kjit/mfma.h's (as gemm_mfma's), the
// tile staging kjit/gemm_staging.h's.
#if !KJIT_HIP || !(defined(__gfx942__) || defined(__gfx950__))
#error                                                                                             \
    "kjit moe_gemm_mfma: MFMA with these shapes is gfx942's and gfx950's; elsewhere use moe_gemm_wgmma"
#else
#include "kjit/gemm_staging.h"
#include "kjit/mfma.h"

template <typename T, int BLOCK_N, int GATED>
__global__ void __launch_bounds__(256, 2)
    moe_gemm_mfma(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT w,
                  const int *KJIT_RESTRICT block_experts, const int *KJIT_RESTRICT totals, int n,
                  int k) {
  using kjit_mfma::K_LANE;
  using kjit_mfma::K_PER_MFMA;
  using Mfma = kjit_mfma::Mfma<T>;
  static_assert(KJIT_WARP_SIZE == 64, "MFMA runs on 64-lane wavefronts");
  constexpr int BLOCK_M = 128, BLOCK_K = 32, THREADS = 256;
  constexpr int WAVE_M = BLOCK_M / 2, WAVE_N = BLOCK_N / 2;
  constexpr int TILES_M = WAVE_M / 32, TILES_N = WAVE_N / 32;
  constexpr int HALVES = GATED ? 2 : 1; // the gate's and the up's products, or the one
  constexpr int LD = BLOCK_K + 8;       // a staged row, in elements: 16-byte aligned, padded
  static_assert(WAVE_N % 32 == 0 && BLOCK_K % K_PER_MFMA == 0, "MFMA tile shapes");
  alignas(16) __shared__ T a_tile[BLOCK_M * LD];          // [m][k]
  alignas(16) __shared__ T b_tile[HALVES * BLOCK_N * LD]; // [half][n][k]

  if (static_cast<int>(blockIdx.y) >= totals[0])
    return; // a block the alignment did not use (the whole block leaves)
  const int expert = block_experts[blockIdx.y];
  const T *weights = w + static_cast<long long>(expert) * HALVES * n * k;
  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  const int wave_row = (wave / 2) * WAVE_M, wave_col = (wave % 2) * WAVE_N;
  const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
  const int rows = block_row + BLOCK_M; // every row of this block exists
  const bool a_vectors = kjit_gemm::aligned16(a) && k % 8 == 0;
  const bool w_vectors = kjit_gemm::aligned16(w) && k % 8 == 0;
  kjit_mfma::Accumulator acc[HALVES][TILES_M][TILES_N] = {};

  kjit_gemm::TileShare<BLOCK_M, BLOCK_K, THREADS, T> a_share;
  kjit_gemm::TileShare<BLOCK_N, BLOCK_K, THREADS, T> w_share[HALVES];
  const auto read = [&](int k0) {
    a_share.read(a, rows, k, block_row, k0, a_vectors);
#pragma unroll
    for (int h = 0; h < HALVES; ++h)
      w_share[h].read(weights + static_cast<long long>(h) * n * k, n, k, block_col, k0, w_vectors);
  };
  read(0);
  for (int k0 = 0; k0 < k; k0 += BLOCK_K) {
    a_share.write([&](int r, int kk, const kjit::Vec<T, 8> &chunk) {
      kjit::store_vec(a_tile + r * LD + kk, chunk);
    });
#pragma unroll
    for (int h = 0; h < HALVES; ++h)
      w_share[h].write([&](int r, int kk, const kjit::Vec<T, 8> &chunk) {
        kjit::store_vec(b_tile + (h * BLOCK_N + r) * LD + kk, chunk);
      });
    __syncthreads();
    if (k0 + BLOCK_K < k) // the next step's tiles, in flight during this step's MFMAs
      read(k0 + BLOCK_K);
    const int fragment_row = lane % 32;
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += K_PER_MFMA) {
      const int fragment_k = kk + (lane / 32) * K_LANE;
      typename Mfma::Operand a_frag[TILES_M], b_frag[HALVES][TILES_N];
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
        a_frag[i] =
            kjit_mfma::operand(a_tile + (wave_row + i * 32 + fragment_row) * LD + fragment_k);
#pragma unroll
      for (int h = 0; h < HALVES; ++h)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
          b_frag[h][j] = kjit_mfma::operand(
              b_tile + (h * BLOCK_N + wave_col + j * 32 + fragment_row) * LD + fragment_k);
#pragma unroll
      for (int h = 0; h < HALVES; ++h)
#pragma unroll
        for (int i = 0; i < TILES_M; ++i)
#pragma unroll
          for (int j = 0; j < TILES_N; ++j)
            acc[h][i][j] = Mfma::run(a_frag[i], b_frag[h][j], acc[h][i][j]);
    }
    __syncthreads(); // the next step overwrites the tiles
  }
#pragma unroll
  for (int i = 0; i < TILES_M; ++i)
#pragma unroll
    for (int j = 0; j < TILES_N; ++j)
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const int row = block_row + wave_row + i * 32 + 8 * (r / 4) + 4 * (lane / 32) + r % 4;
        const int col = block_col + wave_col + j * 32 + lane % 32;
        float value = acc[0][i][j][r];
        if (GATED)
          value = value / (1.0f + __expf(-value)) * acc[HALVES - 1][i][j][r];
        if (col < n)
          c[static_cast<long long>(row) * n + col] = kjit::from_float<T>(value);
      }
}

#endif

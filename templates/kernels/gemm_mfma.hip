// C = A @ B on AMD matrix cores (MFMA), for half and bfloat16 on gfx942 (CDNA3) and gfx950
// (CDNA4): the layout and contract of gemm.hip (A [M, K], B [K, N], C [M, N] row-major; float
// accumulation, one rounding to T).
//
// Each block computes BLOCK_M x BLOCK_N of C with WAVES_M x WAVES_N wavefronts of 64 lanes, each
// wave a (BLOCK_M / WAVES_M) x (BLOCK_N / WAVES_N) tile of 32 x 32 MFMA tiles: on gfx942
// v_mfma_f32_32x32x8_f16 and v_mfma_f32_32x32x8_bf16 (K = 8), on gfx950 the 32x32x16 forms, which
// take twice the K per instruction. Per step of BLOCK_K, the block stages A as [m][k] and B
// transposed, as [n][k], in LDS (rows padded by 8 elements), zero outside the matrices, so M, N
// and K need not be multiples of the tiles. Global reads are 16 bytes wide where the matrices'
// rows allow it (kjit/gemm_staging.h), and the next step's are issued before this step's MFMAs.
//
// The operand and result layouts are kjit/mfma.h's. With B staged as [n][k], both operands are
// K_LANE consecutive elements of an LDS row: one 8-byte (gfx942) or 16-byte (gfx950) LDS read
// each.
#if !KJIT_HIP || !(defined(__gfx942__) || defined(__gfx950__))
#error "kjit gemm_mfma: MFMA with these shapes is gfx942's and gfx950's; elsewhere use gemm"
#else
#include "kjit/gemm_staging.h"
#include "kjit/mfma.h"

// Two blocks per compute unit (two waves per SIMD for 4-wave blocks: at most 256 VGPRs and AGPRs
// a lane): one block's MFMAs overlap the other's staging.
template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int WAVES_M, int WAVES_N>
__global__ void __launch_bounds__(64 * WAVES_M * WAVES_N, 2)
    gemm_mfma(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT b, int m, int n,
              int k) {
  using kjit_mfma::K_LANE;
  using kjit_mfma::K_PER_MFMA;
  using Mfma = kjit_mfma::Mfma<T>;
  static_assert(KJIT_WARP_SIZE == 64, "MFMA runs on 64-lane wavefronts");
  constexpr int THREADS = 64 * WAVES_M * WAVES_N;
  constexpr int WAVE_M = BLOCK_M / WAVES_M, WAVE_N = BLOCK_N / WAVES_N;
  constexpr int TILES_M = WAVE_M / 32, TILES_N = WAVE_N / 32;
  constexpr int LD = BLOCK_K + 8; // a staged row, in elements: 16-byte aligned, padded
  static_assert(WAVE_M % 32 == 0 && WAVE_N % 32 == 0 && BLOCK_K % K_PER_MFMA == 0,
                "MFMA tile shapes");
  static_assert((BLOCK_M + BLOCK_N) * LD * sizeof(T) <= 64 * 1024, "tiles exceed 64 KiB of LDS");
  alignas(16) __shared__ T a_tile[BLOCK_M * LD]; // [m][k]
  alignas(16) __shared__ T b_tile[BLOCK_N * LD]; // [n][k]: B transposed

  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  const int wave_row = (wave / WAVES_N) * WAVE_M, wave_col = (wave % WAVES_N) * WAVE_N;
  const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
  // Whole 16-byte chunks of a row are aligned when the matrix is and its rows are 8k elements.
  const bool a_vectors = kjit_gemm::aligned16(a) && k % 8 == 0;
  const bool b_vectors = kjit_gemm::aligned16(b) && n % 8 == 0;
  kjit_mfma::Accumulator acc[TILES_M][TILES_N] = {};

  kjit_gemm::TileShare<BLOCK_M, BLOCK_K, THREADS, T> a_share;
  kjit_gemm::TileShare<BLOCK_K, BLOCK_N, THREADS, T> b_share;
  a_share.read(a, m, k, block_row, 0, a_vectors);
  b_share.read(b, k, n, 0, block_col, b_vectors);
  for (int k0 = 0; k0 < k; k0 += BLOCK_K) {
    a_share.write([&](int r, int kk, const kjit::Vec<T, 8> &chunk) {
      kjit::store_vec(a_tile + r * LD + kk, chunk); // LD * sizeof(T) is 16k bytes
    });
    b_share.write([&](int kk, int nn, const kjit::Vec<T, 8> &chunk) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        b_tile[(nn + j) * LD + kk] = chunk.at[j];
    });
    __syncthreads();
    if (k0 + BLOCK_K < k) { // the next step's tiles, in flight during this step's MFMAs
      a_share.read(a, m, k, block_row, k0 + BLOCK_K, a_vectors);
      b_share.read(b, k, n, k0 + BLOCK_K, block_col, b_vectors);
    }
    const int fragment_row = lane % 32;
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += K_PER_MFMA) {
      const int fragment_k = kk + (lane / 32) * K_LANE;
      typename Mfma::Operand a_frag[TILES_M], b_frag[TILES_N];
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
        a_frag[i] =
            kjit_mfma::operand(a_tile + (wave_row + i * 32 + fragment_row) * LD + fragment_k);
#pragma unroll
      for (int j = 0; j < TILES_N; ++j)
        b_frag[j] =
            kjit_mfma::operand(b_tile + (wave_col + j * 32 + fragment_row) * LD + fragment_k);
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
          acc[i][j] = Mfma::run(a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads(); // the next stage overwrites the tiles
  }
#pragma unroll
  for (int i = 0; i < TILES_M; ++i)
#pragma unroll
    for (int j = 0; j < TILES_N; ++j)
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const int row = block_row + wave_row + i * 32 + 8 * (r / 4) + 4 * (lane / 32) + r % 4;
        const int col = block_col + wave_col + j * 32 + lane % 32;
        if (row < m && col < n)
          c[static_cast<long long>(row) * n + col] = kjit::from_float<T>(acc[i][j][r]);
      }
}

#endif

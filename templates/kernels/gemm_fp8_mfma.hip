// D = (A x scale_a) @ (B x scale_b)^T on AMD matrix cores (MFMA) from fp8 e4m3 bytes: gemm_fp8's
// contract (gemm_fp8.hip) on gfx942 (CDNA3) and gfx950 (CDNA4). A [M, K] and B [N, K] row-major
// (both K-major, as nn.Linear holds a weight), D bfloat16 [M, N] row-major; SCALING 0 per tensor,
// 1 row-wise (scale_a [M], scale_b [N]), 2 DeepSeek-V3's blocks (scale_a [M, K / 128] per 1 x 128
// block of A, scale_b [ceil(N / 128), K / 128] per 128 x 128 block of B, K a multiple of 128).
//
// The bytes' encoding is the target's, as its MFMA reads them: on gfx942 e4m3fnuz (exponent bias
// 8, no negative zero, 0x80 the only NaN, largest finite 240: torch.float8_e4m3fnuz); on gfx950
// OCP e4m3fn (bias 7, 0x7f and 0xff NaN, largest finite 448: torch.float8_e4m3fn). The same
// instruction, v_mfma_f32_32x32x16_fp8_fp8, takes K = 16 on both; CDNA4's 32x32x64 f8f6f4 form is
// not used (yet).
//
// Each block computes BLOCK_M x BLOCK_N of D with 2 x 2 wavefronts of 64 lanes, each wave a
// (BLOCK_M / 2) x (BLOCK_N / 2) tile of 32 x 32 MFMA tiles. Per step of 64 bytes of K the block
// stages A as [m][k] and B as [n][k] in LDS (rows padded by 16 bytes), zero outside the matrices,
// so M, N and K need not be multiples of the tiles; global reads are 16 bytes wide where rows
// allow, and the next step's are in flight during this step's MFMAs (kjit/gemm_staging.h).
// For SCALING 0 and 1 every product of K adds up in the MFMA accumulators and the scales multiply
// the sums once; for SCALING 2 each 128 of K (two steps) is summed apart, from zero, and added,
// scaled, to float accumulators: the promotion gemm_fp8.hip (and DeepGEMM) makes.
//
// Operand and result layouts of v_mfma_f32_32x32x16_fp8_fp8 for lane l of the wave (LLVM's
// AMDGPU builtins, AMD's matrix instruction calculator): A: lane l holds A(row l % 32, k = (l / 32)
// * 8 + e), e < 8, as one 64-bit register; B: B(k = (l / 32) * 8 + e, column l % 32); C: register
// r is C(row 8 * (r / 4) + 4 * (l / 32) + r % 4, column l % 32). With both operands staged
// K-major, a lane's operand is 8 consecutive bytes of an LDS row: one 8-byte LDS read.
#if !KJIT_HIP || !(defined(__gfx942__) || defined(__gfx950__))
#error                                                                                             \
    "kjit gemm_fp8_mfma: fp8 MFMA is gfx942's (e4m3fnuz) and gfx950's (OCP e4m3); elsewhere use gemm_fp8"
#else
#include "kjit/gemm_staging.h"

namespace kjit_gemm_fp8_mfma {

typedef float Accumulator __attribute__((vector_size(16 * sizeof(float))));
constexpr int K_PER_MFMA = 16, K_LANE = 8; // bytes of K per MFMA, per lane
constexpr int BK = 64;                     // bytes of K per staged step
constexpr int SCALE_BLOCK = 128;           // SCALING 2: K per scale, two steps

// A lane's operand: 8 consecutive bytes of an LDS row, aligned to 8.
__device__ inline long operand(const unsigned char *at) {
  long value;
  __builtin_memcpy(&value, __builtin_assume_aligned(at, 8), sizeof value);
  return value;
}

} // namespace kjit_gemm_fp8_mfma

// Two blocks per compute unit: one block's MFMAs overlap the other's staging.
template <int BLOCK_M, int BLOCK_N, int SCALING>
__global__ void __launch_bounds__(256, 2)
    gemm_fp8_mfma(bfloat16 *KJIT_RESTRICT d, const float *KJIT_RESTRICT scale_a,
                  const float *KJIT_RESTRICT scale_b, const unsigned char *KJIT_RESTRICT a,
                  const unsigned char *KJIT_RESTRICT b, int m, int n, int k) {
  using namespace kjit_gemm_fp8_mfma;
  static_assert(KJIT_WARP_SIZE == 64, "MFMA runs on 64-lane wavefronts");
  static_assert(SCALING >= 0 && SCALING <= 2, "SCALING 0 (tensor), 1 (rows) or 2 (blocks)");
  static_assert(SCALING != 2 || SCALE_BLOCK % BLOCK_N == 0,
                "block scales: a tile's columns share one block of B's scales");
  constexpr int THREADS = 256, WAVE_M = BLOCK_M / 2, WAVE_N = BLOCK_N / 2;
  constexpr int TILES_M = WAVE_M / 32, TILES_N = WAVE_N / 32;
  constexpr int LD = BK + 16; // a staged row, in bytes: 16-byte aligned, padded
  static_assert(WAVE_M % 32 == 0 && WAVE_N % 32 == 0, "MFMA tile shapes");
  alignas(16) __shared__ unsigned char a_tile[BLOCK_M * LD]; // [m][k]
  alignas(16) __shared__ unsigned char b_tile[BLOCK_N * LD]; // [n][k]
  __shared__ float row_scales[SCALING == 2 ? BLOCK_M : 1];   // A's, for this 128 of K

  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  const int wave_row = (wave / 2) * WAVE_M, wave_col = (wave % 2) * WAVE_N;
  const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
  const int k_blocks = (k + SCALE_BLOCK - 1) / SCALE_BLOCK;
  const bool a_vectors = kjit_gemm::aligned16(a) && k % 16 == 0;
  const bool b_vectors = kjit_gemm::aligned16(b) && k % 16 == 0;
  // acc: the result; part: SCALING 2's sum over the running 128 of K.
  Accumulator acc[TILES_M][TILES_N] = {}, part[TILES_M][TILES_N] = {};
  Accumulator(&sums)[TILES_M][TILES_N] = SCALING == 2 ? part : acc;

  kjit_gemm::TileShare<BLOCK_M, BK, THREADS, unsigned char, 16> a_share;
  kjit_gemm::TileShare<BLOCK_N, BK, THREADS, unsigned char, 16> b_share;
  a_share.read(a, m, k, block_row, 0, a_vectors);
  b_share.read(b, n, k, block_col, 0, b_vectors);
  for (int k0 = 0; k0 < k; k0 += BK) {
    const auto stage = [&](unsigned char *tile) {
      return [tile](int r, int kk, const kjit::Vec<unsigned char, 16> &chunk) {
        kjit::store_vec(tile + r * LD + kk, chunk);
      };
    };
    a_share.write(stage(a_tile));
    b_share.write(stage(b_tile));
    const int kb = k0 / SCALE_BLOCK;
    if (SCALING == 2 && k0 % SCALE_BLOCK == 0) // rows past m read the last row's scales
      for (int r = threadIdx.x; r < BLOCK_M; r += THREADS)
        row_scales[r] = scale_a[static_cast<long long>(min(block_row + r, m - 1)) * k_blocks + kb];
    __syncthreads();
    if (k0 + BK < k) { // the next step's tiles, in flight during this step's MFMAs
      a_share.read(a, m, k, block_row, k0 + BK, a_vectors);
      b_share.read(b, n, k, block_col, k0 + BK, b_vectors);
    }
    const int fragment_row = lane % 32;
#pragma unroll
    for (int kk = 0; kk < BK; kk += K_PER_MFMA) {
      const int fragment_k = kk + (lane / 32) * K_LANE;
      long a_frag[TILES_M], b_frag[TILES_N];
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
        a_frag[i] = operand(a_tile + (wave_row + i * 32 + fragment_row) * LD + fragment_k);
#pragma unroll
      for (int j = 0; j < TILES_N; ++j)
        b_frag[j] = operand(b_tile + (wave_col + j * 32 + fragment_row) * LD + fragment_k);
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
          sums[i][j] =
              __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a_frag[i], b_frag[j], sums[i][j], 0, 0, 0);
    }
    if (SCALING == 2 && (k0 + BK) % SCALE_BLOCK == 0) { // the end of a 128 of K: promote
      const float column_scale =
          scale_b[static_cast<long long>(block_col / SCALE_BLOCK) * k_blocks + kb];
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int r = 0; r < 16; ++r) {
          const float scale =
              row_scales[wave_row + i * 32 + 8 * (r / 4) + 4 * (lane / 32) + r % 4] * column_scale;
#pragma unroll
          for (int j = 0; j < TILES_N; ++j) {
            acc[i][j][r] += scale * part[i][j][r];
            part[i][j][r] = 0.0f;
          }
        }
    }
    __syncthreads(); // the next step overwrites the tiles and the row scales
  }
  const float tensor = SCALING == 0 ? scale_a[0] * scale_b[0] : 1.0f;
#pragma unroll
  for (int i = 0; i < TILES_M; ++i)
#pragma unroll
    for (int j = 0; j < TILES_N; ++j)
#pragma unroll
      for (int r = 0; r < 16; ++r) {
        const int row = block_row + wave_row + i * 32 + 8 * (r / 4) + 4 * (lane / 32) + r % 4;
        const int col = block_col + wave_col + j * 32 + lane % 32;
        if (row < m && col < n) {
          const float scale = SCALING == 1 ? scale_a[row] * scale_b[col] : tensor;
          d[static_cast<long long>(row) * n + col] =
              kjit::from_float<bfloat16>(acc[i][j][r] * scale);
        }
      }
}

#endif

// C = A @ B on NVIDIA tensor cores, for half and bfloat16: the layout and contract of gemm.hip
// (A [M, K], B [K, N], C [M, N] row-major; float accumulation, one rounding to T).
//
// Each block computes BLOCK_M x BLOCK_N of C with WARPS_M x WARPS_N warps, each warp a
// (BLOCK_M / WARPS_M) x (BLOCK_N / WARPS_N) tile of 16 x 8 mma.sync.m16n8k16 tiles. Per step of
// BLOCK_K, the block stages A as [m][k] and B transposed as [n][k] in shared memory (rows padded
// by 8 elements so that the fragment loads of a warp fall in distinct banks), zero outside the
// matrices, so M, N and K need not be multiples of the tiles. Global reads are 16 bytes wide
// where the matrices' rows allow it. Fragments follow the PTX ISA's
// layout for m16n8k16: lane = 4 * group + t; A's registers hold (row, k) pairs
// (group [+8], 2t [+8]), B's (k, n) = (2t [+8], group), C's (group [+8], 2t + {0, 1}).
#if KJIT_HIP
#error "kjit gemm_mma: mma.sync is NVIDIA's (sm_80 and newer); on AMD targets use the gemm template"
#else
#include "kjit/packed.h"

namespace kjit_gemm_mma {

template <typename T> struct Mma;
template <> struct Mma<half> {
  __device__ static void run(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <> struct Mma<bfloat16> {
  __device__ static void run(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

// Two consecutive elements of a shared-memory row as one 32-bit register (the lower element in
// the low half, as mma expects); `at` is at an even element offset.
template <typename T> __device__ inline unsigned pair(const T *at) {
  return *reinterpret_cast<const unsigned *>(at);
}

// Reads the ROWS x COLS tile at (row0, col0) of the row-major `rows` x `cols` matrix `from` in
// chunks of 8 consecutive elements of a row (16 bytes: one load where `vectors` says that rows
// start 16-byte aligned and the chunk lies inside the matrix; element by element, zero outside,
// otherwise) and hands each to store(r, c, chunk). Consecutive threads take consecutive chunks.
template <int ROWS, int COLS, int THREADS, typename T, typename Store>
__device__ inline void stage(const T *from, int rows, int cols, int row0, int col0, bool vectors,
                             Store store) {
  static_assert(COLS % 8 == 0, "whole chunks per tile row");
  for (int i = threadIdx.x; i < ROWS * COLS / 8; i += THREADS) {
    const int r = i / (COLS / 8), c = i % (COLS / 8) * 8;
    const int row = row0 + r, col = col0 + c;
    const T *at = from + static_cast<long long>(row) * cols + col;
    kjit::Packed<T, 8> chunk;
    if (vectors && row < rows && col + 8 <= cols) {
      chunk = kjit::load_packed<8>(at);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        chunk.v[j] = row < rows && col + j < cols ? at[j] : kjit::from_float<T>(0.0f);
    }
    store(r, c, chunk);
  }
}

__device__ inline bool aligned16(const void *pointer) {
  return (reinterpret_cast<unsigned long long>(pointer) & 15) == 0;
}

} // namespace kjit_gemm_mma

template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N)
    gemm_mma(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT b, int m, int n,
             int k) {
  constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  constexpr int WARP_M = BLOCK_M / WARPS_M, WARP_N = BLOCK_N / WARPS_N;
  constexpr int TILES_M = WARP_M / 16, TILES_N = WARP_N / 8;
  constexpr int LD = BLOCK_K + 8; // padded row, in elements
  static_assert(WARP_M % 16 == 0 && WARP_N % 8 == 0 && BLOCK_K % 16 == 0, "mma tile shapes");
  static_assert((BLOCK_M + BLOCK_N) * LD * 2 <= 48 * 1024, "tiles exceed 48 KiB of shared memory");
  __shared__ __align__(16) T a_tile[BLOCK_M * LD]; // [m][k]
  __shared__ __align__(16) T b_tile[BLOCK_N * LD]; // [n][k]: B transposed

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, t = lane % 4;
  const int warp_row = (warp / WARPS_N) * WARP_M, warp_col = (warp % WARPS_N) * WARP_N;
  const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
  // Whole 16-byte chunks of a row are aligned when the matrix is and its rows are 8k elements.
  const bool a_vectors = kjit_gemm_mma::aligned16(a) && k % 8 == 0;
  const bool b_vectors = kjit_gemm_mma::aligned16(b) && n % 8 == 0;
  float acc[TILES_M][TILES_N][4] = {};

  for (int k0 = 0; k0 < k; k0 += BLOCK_K) {
    kjit_gemm_mma::stage<BLOCK_M, BLOCK_K, THREADS>(
        a, m, k, block_row, k0, a_vectors,
        [&](int r, int kk, const kjit::Packed<T, 8> &chunk) {
          kjit::store_packed(a_tile + r * LD + kk, chunk); // LD * sizeof(T) is 16k bytes
        });
    kjit_gemm_mma::stage<BLOCK_K, BLOCK_N, THREADS>(
        b, k, n, k0, block_col, b_vectors, [&](int kk, int nn, const kjit::Packed<T, 8> &chunk) {
#pragma unroll
          for (int j = 0; j < 8; ++j)
            b_tile[(nn + j) * LD + kk] = chunk.v[j];
        });
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += 16) {
      unsigned a_frag[TILES_M][4], b_frag[TILES_N][2];
#pragma unroll
      for (int i = 0; i < TILES_M; ++i) {
        const T *rows = a_tile + (warp_row + i * 16 + group) * LD + kk + 2 * t;
        a_frag[i][0] = kjit_gemm_mma::pair(rows);
        a_frag[i][1] = kjit_gemm_mma::pair(rows + 8 * LD);
        a_frag[i][2] = kjit_gemm_mma::pair(rows + 8);
        a_frag[i][3] = kjit_gemm_mma::pair(rows + 8 * LD + 8);
      }
#pragma unroll
      for (int j = 0; j < TILES_N; ++j) {
        const T *column = b_tile + (warp_col + j * 8 + group) * LD + kk + 2 * t;
        b_frag[j][0] = kjit_gemm_mma::pair(column);
        b_frag[j][1] = kjit_gemm_mma::pair(column + 8);
      }
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
          kjit_gemm_mma::Mma<T>::run(acc[i][j], a_frag[i], b_frag[j]);
    }
    __syncthreads(); // the next stage overwrites the tiles
  }
#pragma unroll
  for (int i = 0; i < TILES_M; ++i)
#pragma unroll
    for (int j = 0; j < TILES_N; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = block_row + warp_row + i * 16 + group + (e >= 2 ? 8 : 0);
        const int col = block_col + warp_col + j * 8 + 2 * t + (e & 1);
        if (row < m && col < n)
          c[static_cast<long long>(row) * n + col] = kjit::from_float<T>(acc[i][j][e]);
      }
}

#endif

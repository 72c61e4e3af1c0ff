// C = A @ B with A [M, K], B [K, N] and C [M, N], all row-major and contiguous (torch.matmul's
// layout for contiguous 2-D tensors). Inputs and output are T; products accumulate in float and
// are rounded to T once.
//
// Each block computes a BLOCK_M x BLOCK_N tile of C, walking K in steps of BLOCK_K: the block
// stages one BLOCK_M x BLOCK_K tile of A (transposed, so that a thread's rows are contiguous) and
// one BLOCK_K x BLOCK_N tile of B in shared memory as float, then each of its
// (BLOCK_M / THREAD_M) x (BLOCK_N / THREAD_N) threads accumulates a THREAD_M x THREAD_N tile of C
// in registers. Elements outside A, B or C are read as zero and never written, so M, N and K need
// not be multiples of the tiles.

namespace kjit_gemm {

// Stages rows [row0, row0 + ROWS) x columns [col0, col0 + COLS) of the row-major `rows` x `cols`
// matrix `from` into shared memory, zero outside the matrix. TRANSPOSE stores element (r, c) at
// to[c][r] (leading dimension LD), otherwise at to[r][c]. Consecutive threads take consecutive
// columns: coalesced global reads.
template <int ROWS, int COLS, int LD, bool TRANSPOSE, int THREADS, typename T>
__device__ inline void stage(float *to, const T *from, int rows, int cols, int row0, int col0) {
  for (int i = threadIdx.x; i < ROWS * COLS; i += THREADS) {
    const int r = i / COLS, c = i % COLS;
    const int row = row0 + r, col = col0 + c;
    const float value = row < rows && col < cols
                            ? kjit::to_float(from[static_cast<long long>(row) * cols + col])
                            : 0.0f;
    to[TRANSPOSE ? c * LD + r : r * LD + c] = value;
  }
}

} // namespace kjit_gemm

template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int THREAD_M, int THREAD_N>
__global__ void
__launch_bounds__((BLOCK_M / THREAD_M) * (BLOCK_N / THREAD_N))
    gemm(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT b, int m, int n,
         int k) {
  constexpr int THREADS_M = BLOCK_M / THREAD_M, THREADS_N = BLOCK_N / THREAD_N;
  constexpr int THREADS = THREADS_M * THREADS_N;
  // A's tile is stored [BLOCK_K][BLOCK_M + 4]: the padding spreads the transposed stores over
  // the banks and keeps each row 16-byte aligned.
  constexpr int A_LD = BLOCK_M + 4;
  static_assert(BLOCK_M % THREAD_M == 0 && BLOCK_N % THREAD_N == 0, "thread tiles must divide");
  static_assert(THREADS >= 32 && THREADS <= 1024, "(BLOCK_M/THREAD_M)*(BLOCK_N/THREAD_N) threads");
  static_assert((BLOCK_K * (A_LD + BLOCK_N)) * 4 <= 48 * 1024, "tiles exceed 48 KiB of LDS");
  __shared__ float a_tile[BLOCK_K * A_LD];
  __shared__ float b_tile[BLOCK_K * BLOCK_N];

  const int thread_row = threadIdx.x / THREADS_N, thread_col = threadIdx.x % THREADS_N;
  const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
  float acc[THREAD_M][THREAD_N] = {};
  for (int k0 = 0; k0 < k; k0 += BLOCK_K) {
    kjit_gemm::stage<BLOCK_M, BLOCK_K, A_LD, true, THREADS>(a_tile, a, m, k, block_row, k0);
    kjit_gemm::stage<BLOCK_K, BLOCK_N, BLOCK_N, false, THREADS>(b_tile, b, k, n, k0, block_col);
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; ++kk) {
      float a_frag[THREAD_M], b_frag[THREAD_N];
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i)
        a_frag[i] = a_tile[kk * A_LD + thread_row * THREAD_M + i];
#pragma unroll
      for (int j = 0; j < THREAD_N; ++j)
        b_frag[j] = b_tile[kk * BLOCK_N + thread_col * THREAD_N + j];
#pragma unroll
      for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j)
          acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads(); // the next stage overwrites the tiles
  }
#pragma unroll
  for (int i = 0; i < THREAD_M; ++i) {
    const int row = block_row + thread_row * THREAD_M + i;
#pragma unroll
    for (int j = 0; j < THREAD_N; ++j) {
      const int col = block_col + thread_col * THREAD_N + j;
      if (row < m && col < n)
        c[static_cast<long long>(row) * n + col] = kjit::from_float<T>(acc[i][j]);
    }
  }
}

// C = A @ B on NVIDIA tensor cores, for half and bfloat16: the layout and contract of gemm.hip
// (A [M, K], B [K, N], C [M, N] row-major; float accumulation, one rounding to T).
//
// Each block computes BLOCK_M x BLOCK_N of C with WARPS_M x WARPS_N warps, each warp a
// (BLOCK_M / WARPS_M) x (BLOCK_N / WARPS_N) tile of 16 x 8 mma.sync.m16n8k16 tiles. Per step of
// BLOCK_K, the block stages A as [m][k] and B as [k][n] in shared memory (rows padded by 8
// elements so that a warp's fragment loads fall in distinct banks), zero outside the matrices,
// so M, N and K need not be multiples of the tiles; fragments come out of it by ldmatrix (B's
// transposed). Global reads are 16 bytes wide where the matrices' rows allow it, and the next
// step's are issued before this step's mma.
// Fragments follow the PTX ISA's layout for m16n8k16, lane = 4 * group + t: A's registers hold
// (row, k) = (group [+8], 2t [+8] + {0, 1}), B's (k, n) = (2t [+8] + {0, 1}, group), C's
// (row, n) = (group [+8], 2t + {0, 1}).
#if KJIT_HIP
#error "kjit gemm_mma: mma.sync is NVIDIA's (sm_80 and newer); on AMD targets use the gemm template"
#else
#include "kjit/gemm_staging.h"
#include "kjit/mma_sync.h"

namespace kjit_gemm_mma {

// 16 bytes read once: past L1, so that what is reused (the activations) stays there.
template <typename T> __device__ inline uint4 load_streaming(const T *p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

} // namespace kjit_gemm_mma

// Two blocks per multiprocessor (at most 128 registers a thread for 256 threads): one block's
// mma overlaps the other's staging.
template <typename T, int BLOCK_M, int BLOCK_N, int BLOCK_K, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(32 * WARPS_M * WARPS_N, 2)
    gemm_mma(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT b, int m, int n,
             int k) {
  constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  constexpr int WARP_M = BLOCK_M / WARPS_M, WARP_N = BLOCK_N / WARPS_N;
  constexpr int TILES_M = WARP_M / 16, TILES_N = WARP_N / 8;
  constexpr int LD = BLOCK_K + 8;   // A's padded row, in elements
  constexpr int B_LD = BLOCK_N + 8; // B's: 8 rows of a ldmatrix fall in distinct banks
  static_assert(WARP_M % 16 == 0 && WARP_N % 16 == 0 && BLOCK_K % 16 == 0, "mma tile shapes");
  static_assert((BLOCK_M * LD + BLOCK_K * B_LD) * 2 <= 48 * 1024, "tiles exceed 48 KiB");
  __shared__ __align__(16) T a_tile[BLOCK_M * LD];   // [m][k]
  __shared__ __align__(16) T b_tile[BLOCK_K * B_LD]; // [k][n]

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, t = lane % 4;
  const int warp_row = (warp / WARPS_N) * WARP_M, warp_col = (warp % WARPS_N) * WARP_N;
  const int block_row = blockIdx.y * BLOCK_M, block_col = blockIdx.x * BLOCK_N;
  // Whole 16-byte chunks of a row are aligned when the matrix is and its rows are 8k elements.
  const bool a_vectors = kjit_gemm::aligned16(a) && k % 8 == 0;
  const bool b_vectors = kjit_gemm::aligned16(b) && n % 8 == 0;
  float acc[TILES_M][TILES_N][4] = {};

  kjit_gemm::TileShare<BLOCK_M, BLOCK_K, THREADS, T> a_share;
  kjit_gemm::TileShare<BLOCK_K, BLOCK_N, THREADS, T> b_share;
  a_share.read(a, m, k, block_row, 0, a_vectors);
  b_share.read(b, k, n, 0, block_col, b_vectors);
  for (int k0 = 0; k0 < k; k0 += BLOCK_K) {
    a_share.write([&](int r, int kk, const kjit::Vec<T, 8> &chunk) {
      kjit::store_vec(a_tile + r * LD + kk, chunk); // LD * sizeof(T) is 16k bytes
    });
    b_share.write([&](int kk, int nn, const kjit::Vec<T, 8> &chunk) {
      kjit::store_vec(b_tile + kk * B_LD + nn, chunk); // B_LD * sizeof(T) is 16k bytes
    });
    __syncthreads();
    if (k0 + BLOCK_K < k) { // the next step's tiles, in flight during this step's compute
      a_share.read(a, m, k, block_row, k0 + BLOCK_K, a_vectors);
      b_share.read(b, k, n, k0 + BLOCK_K, block_col, b_vectors);
    }
#pragma unroll
    for (int kk = 0; kk < BLOCK_K; kk += 16) {
      unsigned a_frag[TILES_M][4], b_frag[TILES_N][2];
      // Lane 8i + r points at row r of matrix i. A's matrices are (rows 0-7, k 0-7), (rows 8-15,
      // k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15): its four fragment registers in order.
      const int matrix = lane / 8, row = lane % 8;
#pragma unroll
      for (int i = 0; i < TILES_M; ++i) {
        kjit::mma_sync::ldmatrix_x4<false>(
            a_frag[i],
            a_tile + (warp_row + i * 16 + (matrix % 2) * 8 + row) * LD + kk + (matrix / 2) * 8);
      }
      // B's, transposed, serve two n-tiles: (k 0-7, n 0-7), (k 8-15, n 0-7), then n 8-15.
#pragma unroll
      for (int j = 0; j < TILES_N; j += 2) {
        const T *rows =
            b_tile + (kk + (matrix % 2) * 8 + row) * B_LD + warp_col + j * 8 + (matrix / 2) * 8;
        unsigned pairs[4];
        kjit::mma_sync::ldmatrix_x4<true>(pairs, rows);
        b_frag[j][0] = pairs[0];
        b_frag[j][1] = pairs[1];
        b_frag[j + 1][0] = pairs[2];
        b_frag[j + 1][1] = pairs[3];
      }
#pragma unroll
      for (int i = 0; i < TILES_M; ++i)
#pragma unroll
        for (int j = 0; j < TILES_N; ++j)
          kjit::mma_sync::Mma<T>::run(acc[i][j], a_frag[i], b_frag[j][0], b_frag[j][1]);
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

// C = A @ W^T for few rows of A (decode: m up to 64), W [N, K] an nn.Linear weight; A [M, K],
// C [M, N] row-major, float accumulation, one rounding to T. Bound by reading W once, so every
// element of W is loaded exactly once, 16 bytes per load, straight into mma registers, with
// UNROLL * ROW_BLOCKS * 2 loads in flight per thread; nothing of W goes through shared memory.
//
// The swap: W's rows are the mma's M (16 rows per mma), A's rows (tokens) its N (8 per mma), so
// C^T is computed and a block's M_TILE tokens take M_TILE / 8 mma per 16 rows of W. A dot
// product does not depend on the order of its terms, so the K of both operands may be permuted
// alike: lane 4g + t loads the 8 consecutive elements k0 + 8t .. k0 + 8t + 7 of W's rows g and
// g + 8 and of token g, and in the first of two k16 steps uses the first four as its fragment's
// k-slots (2t, 2t + 1, 2t + 8, 2t + 9), in the second the last four. So 32 of K per pair of
// steps, every fragment a 16-byte load, no shuffles.
//
// A block has WARPS warps over 16 * ROW_BLOCKS rows of W: the warps split K (warp w takes the
// 32-element chunks w, w + WARPS, ...) and add their partial sums in shared memory at the end.
// W streams past L1 (no_allocate); A is read by every block and stays in the caches.
template <typename T, int M_TILE, int ROW_BLOCKS, int WARPS, int UNROLL>
__global__ void __launch_bounds__(32 * WARPS)
    linear_skinny(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT w, int m,
                  int n, int k) {
  static_assert(M_TILE % 8 == 0, "tokens in tiles of 8");
  constexpr int TOKEN_TILES = M_TILE / 8, ROWS = 16 * ROW_BLOCKS;
  constexpr int STRIDE = ROWS + 4; // a partial sum's row in shared memory: lanes in distinct banks
  __shared__ float sums[M_TILE * STRIDE];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, t = lane % 4;
  const int row0 = blockIdx.x * ROWS, token0 = blockIdx.y * M_TILE;
  float acc[ROW_BLOCKS][TOKEN_TILES][4] = {};

  // Rows of W past n and tokens past m are clamped to the last one rather than skipped: their
  // sums are never stored, and unconditional loads let the compiler issue all of a step's loads
  // before its first mma.
  const T *w_rows[ROW_BLOCKS][2];
#pragma unroll
  for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      w_rows[i][h] = w + static_cast<long long>(min(row0 + 16 * i + 8 * h + group, n - 1)) * k;
  const T *a_rows[TOKEN_TILES];
#pragma unroll
  for (int j = 0; j < TOKEN_TILES; ++j)
    a_rows[j] = a + static_cast<long long>(min(token0 + 8 * j + group, m - 1)) * k;

  // One step of UNROLL chunks of 32 (this warp's `first`, first + WARPS, ...). k is a multiple of
  // 8, so a thread's 8 elements lie wholly inside or outside the matrix; a checked step tests each
  // load against k, the others (every chunk whole, the constant folded once inlined) do not.
  const auto step = [&](int first, bool checked) {
    uint4 w_frag[UNROLL][ROW_BLOCKS][2], a_frag[UNROLL][TOKEN_TILES];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int kk = (first + u * WARPS) * 32 + 8 * t;
      const bool inside = !checked || kk < k;
#pragma unroll
      for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          w_frag[u][i][h] =
              inside ? kjit_gemm_mma::load_streaming(w_rows[i][h] + kk) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int j = 0; j < TOKEN_TILES; ++j)
        a_frag[u][j] = inside ? __ldg(reinterpret_cast<const uint4 *>(a_rows[j] + kk))
                              : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
#pragma unroll
      for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
        for (int j = 0; j < TOKEN_TILES; ++j) {
          const uint4 &lo = w_frag[u][i][0], &hi = w_frag[u][i][1], &x = a_frag[u][j];
          const unsigned a0[4] = {lo.x, hi.x, lo.y, hi.y}, b0[2] = {x.x, x.y};
          const unsigned a1[4] = {lo.z, hi.z, lo.w, hi.w}, b1[2] = {x.z, x.w};
          kjit::mma_sync::Mma<T>::run(acc[i][j], a0, b0[0], b0[1]);
          kjit::mma_sync::Mma<T>::run(acc[i][j], a1, b1[0], b1[1]);
        }
  };
  // Steps of whole chunks, then at most one checked step for this warp's remaining chunks (fewer
  // than UNROLL, the last perhaps partial).
  int first = warp;
  for (; first + (UNROLL - 1) * WARPS < k / 32; first += WARPS * UNROLL)
    step(first, false);
  if (first * 32 < k)
    step(first, true);

  // The warps' partial sums, added in warp order (the same result on every run): accumulator e
  // of (i, j) is W's row 16i + group (+8 for e >= 2) and token 8j + 2t + (e & 1).
  for (int turn = 0; turn < WARPS; ++turn) {
    if (warp == turn) {
#pragma unroll
      for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
        for (int j = 0; j < TOKEN_TILES; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float &sum =
                sums[(8 * j + 2 * t + (e & 1)) * STRIDE + 16 * i + group + (e >= 2 ? 8 : 0)];
            sum = turn == 0 ? acc[i][j][e] : sum + acc[i][j][e];
          }
    }
    __syncthreads();
  }
  // C's rows are n apart and n is a multiple of 8: pairs of columns, 4-byte stores.
  for (int pair = threadIdx.x; pair < M_TILE * ROWS / 2; pair += 32 * WARPS) {
    const int token = pair / (ROWS / 2), column = 2 * (pair % (ROWS / 2));
    if (token0 + token < m && row0 + column < n)
      *reinterpret_cast<typename kjit::Pairs<T>::type *>(
          c + static_cast<long long>(token0 + token) * n + row0 + column) =
          kjit::Pairs<T>::pack(sums[token * STRIDE + column], sums[token * STRIDE + column + 1]);
  }
}

namespace kjit_gemm_mma {

// 16 bytes from global `from` into shared `to` without registers (cp.async, sm_80 and newer),
// or 16 zeros when `fill` is false (`from` is then not read).
template <typename T> __device__ inline void copy_async16(T *to, const T *from, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(to))),
               "l"(from), "r"(fill ? 16 : 0)
               : "memory");
}
__device__ inline void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING> __device__ inline void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// The cluster's blocks wait for each other (all threads of every block).
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
// 16 bytes at `p`'s offset in the shared memory of the cluster's block `rank`.
__device__ inline float4 load_from_block(const float *p, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

} // namespace kjit_gemm_mma

// C = A @ W^T for tens of rows of A (m about 16 to 128), W [N, K] an nn.Linear weight; A [M, K],
// C [M, N] row-major, float accumulation, one rounding to T. sm_90 and newer (clusters).
//
// linear_skinny's swapped mma (W's rows the mma's M, tokens its N, K permuted alike in both
// operands, W loaded 16 bytes at a time straight into registers), but the tokens come from
// shared memory: the warps of a block take 16 * ROW_BLOCKS rows of W each and share one staged
// slice of M_TILE tokens x K_SLICE, so A crosses L2 once per block (16 * ROW_BLOCKS * WARPS rows
// of W) rather than once per 16 rows, which is what bounds linear_skinny beyond 16 tokens. Two
// stages: the next slice's W (into registers) and A (cp.async, into the other of two buffers) are
// in flight while this slice is multiplied.
//
// The SPLITS blocks of a cluster (consecutive in x) split K into SPLITS ranges of whole 32s, so
// that a few rows of W still make enough blocks to fill the device; their partial sums meet in
// distributed shared memory, each block adding up 1 / SPLITS of the tile over the blocks in rank
// order (the same result on every run): one launch, no workspace.
template <typename T, int M_TILE, int ROW_BLOCKS, int WARPS, int K_SLICE, int SPLITS>
__global__ void __launch_bounds__(32 * WARPS)
    linear_splitk(T *KJIT_RESTRICT c, const T *KJIT_RESTRICT a, const T *KJIT_RESTRICT w, int m,
                  int n, int k) {
  static_assert(M_TILE % 8 == 0 && K_SLICE % 32 == 0, "tokens in 8s, K in 32s");
  constexpr int THREADS = 32 * WARPS, TOKEN_TILES = M_TILE / 8, CHUNKS = K_SLICE / 32;
  constexpr int ROWS = 16 * ROW_BLOCKS * WARPS; // rows of W per block: columns of C
  constexpr int A_LD = K_SLICE + 8; // a token's staged row: 16 bytes of padding, no conflicts
  constexpr int SUMS_LD = ROWS + 4; // a token's partial sums: rows 16-byte aligned
  constexpr int A_BYTES = 2 * M_TILE * A_LD * 2, SUMS_BYTES = M_TILE * SUMS_LD * 4;
  constexpr int SHARED = A_BYTES > SUMS_BYTES ? A_BYTES : SUMS_BYTES;
  static_assert(SHARED <= 48 * 1024, "A's two slices or the partial sums exceed 48 KiB");
  __shared__ __align__(16) unsigned char shared[SHARED]; // A's two slices, then the sums
  T *a_tiles = reinterpret_cast<T *>(shared);
  float *sums = reinterpret_cast<float *>(shared);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, t = lane % 4;
  const int split = blockIdx.x % SPLITS, row0 = blockIdx.x / SPLITS * ROWS;
  const int token0 = blockIdx.y * M_TILE;
  const int per_split = ((k + 31) / 32 + SPLITS - 1) / SPLITS * 32;
  const int k_begin = split * per_split, k_end = min(k, k_begin + per_split);

  // Rows of W past n are clamped to the last one, as in linear_skinny: never stored.
  const T *w_rows[ROW_BLOCKS][2];
#pragma unroll
  for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      w_rows[i][h] = w + static_cast<long long>(
                             min(row0 + 16 * (warp * ROW_BLOCKS + i) + 8 * h + group, n - 1)) *
                             k;
  // Slice `k0`'s loads: this warp's rows of W into `w_frag`, and (by cp.async, zeros outside
  // the tokens and [k0, k_end)) the block's tokens into A's buffer `buffer`. k is a multiple of
  // 8, so a thread's 8 elements lie wholly inside or outside the range.
  const auto load_slice = [&](int k0, uint4(&w_frag)[CHUNKS][ROW_BLOCKS][2], int buffer) {
    const bool checked = k0 + K_SLICE > k_end;
#pragma unroll
    for (int u = 0; u < CHUNKS; ++u) {
      const int kk = k0 + u * 32 + 8 * t;
      const bool inside = !checked || kk < k_end;
#pragma unroll
      for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          w_frag[u][i][h] =
              inside ? kjit_gemm_mma::load_streaming(w_rows[i][h] + kk) : make_uint4(0, 0, 0, 0);
    }
    for (int index = threadIdx.x; index < M_TILE * (K_SLICE / 8); index += THREADS) {
      const int token = index / (K_SLICE / 8), kk = index % (K_SLICE / 8) * 8;
      const bool inside = token0 + token < m && k0 + kk < k_end;
      kjit_gemm_mma::copy_async16(
          a_tiles + (buffer * M_TILE + token) * A_LD + kk,
          inside ? a + static_cast<long long>(token0 + token) * k + k0 + kk : a, inside);
    }
    kjit_gemm_mma::copy_async_commit();
  };
  // Two stages: slice s + 1's loads are in flight while slice s is multiplied.
  float acc[ROW_BLOCKS][TOKEN_TILES][4] = {};
  uint4 w_now[CHUNKS][ROW_BLOCKS][2], w_next[CHUNKS][ROW_BLOCKS][2];
  if (k_begin < k_end)
    load_slice(k_begin, w_now, 0);
  int buffer = 0;
  for (int k0 = k_begin; k0 < k_end; k0 += K_SLICE, buffer ^= 1) {
    const bool more = k0 + K_SLICE < k_end;
    if (more)
      load_slice(k0 + K_SLICE, w_next, buffer ^ 1);
    if (more)
      kjit_gemm_mma::copy_async_wait<1>(); // this slice's tokens have landed; the next's may not
    else
      kjit_gemm_mma::copy_async_wait<0>();
    __syncthreads();
    const T *a_tile = a_tiles + buffer * M_TILE * A_LD;
#pragma unroll
    for (int u = 0; u < CHUNKS; ++u)
#pragma unroll
      for (int j = 0; j < TOKEN_TILES; ++j) {
        const uint4 x =
            *reinterpret_cast<const uint4 *>(a_tile + (8 * j + group) * A_LD + u * 32 + 8 * t);
        const unsigned b0[2] = {x.x, x.y}, b1[2] = {x.z, x.w};
#pragma unroll
        for (int i = 0; i < ROW_BLOCKS; ++i) {
          const uint4 &lo = w_now[u][i][0], &hi = w_now[u][i][1];
          const unsigned a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
          kjit::mma_sync::Mma<T>::run(acc[i][j], a0, b0[0], b0[1]);
          kjit::mma_sync::Mma<T>::run(acc[i][j], a1, b1[0], b1[1]);
        }
      }
    __syncthreads(); // every warp is done with this buffer before the slice after next fills it
#pragma unroll
    for (int u = 0; u < CHUNKS; ++u)
#pragma unroll
      for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          w_now[u][i][h] = w_next[u][i][h];
  }

  // This block's partial sums, [token][column of C], over A's slice: accumulator e of (i, j) is
  // W's row 16 (warp * ROW_BLOCKS + i) + group (+8 for e >= 2) and token 8j + 2t + (e & 1).
  __syncthreads();
#pragma unroll
  for (int i = 0; i < ROW_BLOCKS; ++i)
#pragma unroll
    for (int j = 0; j < TOKEN_TILES; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        sums[(8 * j + 2 * t + (e & 1)) * SUMS_LD + 16 * (warp * ROW_BLOCKS + i) + group +
             (e >= 2 ? 8 : 0)] = acc[i][j][e];
  if (SPLITS > 1)
    kjit_gemm_mma::cluster_sync(); // every block's sums are written
  else
    __syncthreads();
  // Block `split` adds up its share of the tile's groups of 4 columns over the cluster's blocks,
  // in rank order. C's rows are n apart and n is a multiple of 8: whole groups, two pair stores.
  constexpr int QUADS = M_TILE * ROWS / 4, SHARE = (QUADS + SPLITS - 1) / SPLITS;
  for (int quad = split * SHARE + threadIdx.x; quad < min(QUADS, (split + 1) * SHARE);
       quad += THREADS) {
    const int token = quad / (ROWS / 4), column = quad % (ROWS / 4) * 4;
    if (token0 + token >= m || row0 + column >= n)
      continue;
    float4 total = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int block = 0; block < SPLITS; ++block) {
      const float4 part = kjit_gemm_mma::load_from_block(sums + token * SUMS_LD + column, block);
      total.x += part.x;
      total.y += part.y;
      total.z += part.z;
      total.w += part.w;
    }
    auto *out = reinterpret_cast<typename kjit::Pairs<T>::type *>(
        c + static_cast<long long>(token0 + token) * n + row0 + column);
    out[0] = kjit::Pairs<T>::pack(total.x, total.y);
    out[1] = kjit::Pairs<T>::pack(total.z, total.w);
  }
  if (SPLITS > 1)
    kjit_gemm_mma::cluster_sync(); // no block leaves while a peer may still read its sums
}

#endif

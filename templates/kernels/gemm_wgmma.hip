// C = A @ B on Hopper tensor cores (sm_90a: wgmma, TMA, setmaxnreg), for half and bfloat16: A
// [M, K] row-major; B either [K, N] row-major (B_KMAJOR = 0, the contract of gemm.hip, read by
// wgmma as a transposed operand) or an nn.Linear weight W [N, K] row-major (B_KMAJOR = 1, C =
// A @ W^T); C [M, N] row-major, float accumulation, one rounding to T.
//
// A and B arrive as tensor maps (kjit::encode_tensor_map) with the 128-byte swizzle: boxes of
// 128 x 64 of A, and of BLOCK_N x 64 (W) or 64 x 64 (B, BLOCK_N / 64 boxes side by side) of B.
// The maps' bounds make ragged M, N and K work: reads past an edge fill zeros, so partial tiles
// add nothing; stores are checked against m and n (EPILOGUE 0) or dropped past the edges by the
// copy engine (EPILOGUE 1).
//
// Three warpgroups. Warpgroup 0 gives up registers (setmaxnreg) and one of its threads issues
// the copies into a ring of STAGES stages, each guarded by a "full" mbarrier (the copy engine
// counts its bytes in) and an "empty" one (each consumer arrives when its wgmma no longer reads
// the stage). Warpgroups 1 and 2 take 64 rows each of a 128 x BLOCK_N tile and keep it in
// registers, one wgmma m64nBLOCK_Nk16 per 16 of K, one batch of BK / 16 in flight while the
// previous stage is released. The grid is persistent: block b takes tiles b, b + gridDim.x, ...
// in a grouped order (GROUP_M rows of tiles sweep the columns together, so a group's B stays in
// L2), and the consumers' stores of one tile overlap the producer's loads of the next.
//
// CLUSTER_M = 2 (or CLUSTER_N = 2) runs the grid in clusters of two blocks that take vertically
// (horizontally) adjacent tiles, which share B's (A's) tile of every K step: each block copies
// half of it, multicast into both blocks' shared memory, and half the bytes leave L2. A stage is
// then written by both producers, so it is free only when both blocks' consumers are done with
// it: each consumer arrives on the "empty" barrier of every block of the cluster. The blocks
// wait for each other after making their barriers (a copy may not land before the peer's
// barrier exists) and before exiting (nor after the peer has gone).
//
// EPILOGUE 1 stores C through shared memory: each consumer writes 64 x 64 boxes of its rows,
// in the 128-byte swizzle (no bank conflicts), into one of two buffers, and the copy engine
// stores the box while the next is written (kjit::hopper::store_boxes). EPILOGUE 0 stores pairs
// from registers.
//
// SPLIT_K > 1 (with clusters of one tile: CLUSTER_M = CLUSTER_N = 1, EPILOGUE 0, BLOCK_N 128
// or less) is for few rows of A, where the tiles are fewer than the multiprocessors and the kernel
// is bound by reading B: the grid runs in clusters of SPLIT_K blocks that take the same tile, block
// r the K steps r, r + SPLIT_K, ... Each consumer then writes its float sums into a reduction
// buffer of its block's shared memory and announces them on every block's "ready" mbarrier; block r
// adds up the r-th of SPLIT_K shares of the tile's sums over the cluster's buffers in rank order
// (the same result on every run), stores them, and tells every block on its "done" mbarrier that
// it has read their buffers, which the next tile may then overwrite.
//
// SWAP_AB = 1 (K-major B, EPILOGUE 0) computes C's transpose: the launch passes W [N, K] as A and
// the activations [M, K] as the K-major B, with m and n exchanged, and each sum is stored to its
// transposed place. For linear() at few rows: W's rows fill wgmma's 64-row side, and the rows of
// A are its N side, as narrow as BLOCK_N 16, so a stage holds little besides W.
//
// BLOCK_M 64 (SWAP_AB) makes tiles of 64 rows of A, one consumer's: the second consumer
// warpgroup idles. Twice the tiles of 128 rows, for a product whose tiles of 128 rows leave most
// multiprocessors idle (linear() on a weight of 4096 rows: 32 tiles). With CLUSTER_N 2 the pair
// shares A's 64-row tile, each block copying 32 rows of it (the launch's boxes of A are then 32
// rows): the two tiles of the activations read each tile of W from L2 once.
#if KJIT_HIP
#error "kjit gemm_wgmma: wgmma and TMA are NVIDIA Hopper's (sm_90a); on AMD targets use gemm"
#else

#include "kjit/hopper.h"

namespace kjit_gemm_wgmma {

using namespace kjit::hopper;

constexpr int BK = 64; // one 128-byte swizzle row of 16-bit elements

// The split-K reduction's exchange between the blocks of a cluster (kjit/hopper.h has the rest).
// As barrier_arrive_in, but releasing at cluster scope this thread's earlier writes (and those
// its warpgroup's barrier ordered before them) to the peer that waits with barrier_wait_cluster.
__device__ inline void barrier_arrive_released_in(unsigned long long *bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
               "fence.acq_rel.cluster;\n"
               "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}" ::"r"(
                   shared_address(bar)),
               "r"(rank)
               : "memory");
}
// barrier_wait, acquiring at cluster scope what the arrivals released.
__device__ inline void barrier_wait_cluster(unsigned long long *bar, unsigned parity) {
  asm volatile("{\n.reg .pred done;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(shared_address(bar)),
               "r"(parity)
               : "memory");
}
// 16 bytes at `p`'s offset in the shared memory of the cluster's block `rank`.
__device__ inline float4 load_from_block(const float4 *p, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(shared_address(p)), "r"(rank));
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

} // namespace kjit_gemm_wgmma

// One block per multiprocessor: the 384 threads' register cap at entry (65536 / 384) is what
// setmaxnreg redistributes, 40 to the producer and 232 to each consumer.
// SHAPE_M, SHAPE_N and SHAPE_K other than 0 make that size a compile-time constant (the launch
// passes the same value), so the tile counts, the K loop's trip count and the epilogue's bounds
// fold; 0 takes the argument. The launch gives A's map boxes of 64 rows (a tile's halves; 32,
// the halves of a 64-row tile, for BLOCK_M 64 in a pair along N) and a K-major B's of BLOCK_N /
// CLUSTER_M rows (the halves each block of a pair copies), and C's of 64 x 64.
template <typename T, int BLOCK_N, int STAGES, int B_KMAJOR, int GROUP_M, int CLUSTER_M,
          int CLUSTER_N, int EPILOGUE, int SPLIT_K, int SWAP_AB, int BLOCK_M, int SHAPE_M,
          int SHAPE_N, int SHAPE_K>
__global__ void __launch_bounds__(384, 1)
    gemm_wgmma(T *KJIT_RESTRICT c, const __grid_constant__ kjit::TensorMap map_c,
               const __grid_constant__ kjit::TensorMap map_a,
               const __grid_constant__ kjit::TensorMap map_b, int m_arg, int n_arg, int k_arg) {
  using namespace kjit_gemm_wgmma;
  // SHAPE_M and SHAPE_N are C's sizes: SWAP_AB's kernel m and n are C's n and m.
  constexpr int FIXED_M = SWAP_AB ? SHAPE_N : SHAPE_M, FIXED_N = SWAP_AB ? SHAPE_M : SHAPE_N;
  const int m = FIXED_M > 0 ? FIXED_M : m_arg, n = FIXED_N > 0 ? FIXED_N : n_arg,
            k = SHAPE_K > 0 ? SHAPE_K : k_arg;
  // Stores the sums of (row, column) and (row, column + 1) of the product. As they are, a pair
  // in C's row: n is even (the tensor map's rows are 16-byte multiples), so a pair starting
  // inside the matrix ends inside it, one 4-byte store. SWAP_AB: the product is C's transpose
  // (m rows of W, n of A), each sum its own element of C [n, m], and n may be odd.
  const auto store_pair = [&](int row, int column, float first, float second) {
    if (row >= m || column >= n)
      return;
    if (SWAP_AB) {
      c[static_cast<long long>(column) * m + row] = kjit::from_float<T>(first);
      if (column + 1 < n)
        c[static_cast<long long>(column + 1) * m + row] = kjit::from_float<T>(second);
    } else {
      *reinterpret_cast<typename kjit::Pairs<T>::type *>(
          c + static_cast<long long>(row) * n + column) = kjit::Pairs<T>::pack(first, second);
    }
  };
  static_assert(BLOCK_N == 16 || BLOCK_N == 32 || BLOCK_N == 64 || BLOCK_N == 128 || BLOCK_N == 256,
                "wgmma N of 16, 32, 64, 128 or 256");
  static_assert(BLOCK_N >= 64 || (B_KMAJOR && EPILOGUE == 0),
                "BLOCK_N below 64 takes a K-major B and EPILOGUE 0 (64-column boxes)");
  static_assert(!SWAP_AB || (B_KMAJOR && EPILOGUE == 0),
                "SWAP_AB takes a K-major B and EPILOGUE 0 (C's transposed stores)");
  constexpr int CLUSTER = CLUSTER_M * CLUSTER_N;
  static_assert(BLOCK_M == 128 || (BLOCK_M == 64 && SWAP_AB), "BLOCK_M of 128, or 64 with SWAP_AB");
  constexpr int BM = BLOCK_M, CONSUMERS = BM / 64; // a consumer warpgroup per 64 rows of A
  static_assert(CLUSTER_M >= 1 && CLUSTER_N >= 1 && CLUSTER <= 2, "clusters of 1 or 2 blocks");
  static_assert(SPLIT_K == 1 || (CLUSTER == 1 && EPILOGUE == 0 && BLOCK_N <= 128),
                "SPLIT_K > 1 takes clusters of one tile, EPILOGUE 0 and BLOCK_N 128 or less");
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = BLOCK_N * BK * 2, STAGE = A_BYTES + B_BYTES;
  constexpr int SUMS_BYTES = SPLIT_K > 1 ? BM * BLOCK_N * 4 : 0; // the reduction buffer
  constexpr unsigned COLUMN_BLOCK = 64 * BK * 2;                 // an MN-major B tile's 64 columns
  constexpr int C_BOX = 64 * 64 * 2; // EPILOGUE 1: one box of a consumer's rows
  // Dynamic shared memory: STAGES stages, 1024-byte aligned (the swizzle's period), then for
  // EPILOGUE 1 two C boxes per consumer, then the barriers. The launch asks for the alignment's
  // slack (gemm.cpp).
  extern __shared__ unsigned char shared_raw[];
  unsigned char *stages = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull);
  unsigned char *c_boxes = stages + STAGES * STAGE;
  float4 *sums = reinterpret_cast<float4 *>(c_boxes + (EPILOGUE ? 4 * C_BOX : 0));
  unsigned long long *full =
      reinterpret_cast<unsigned long long *>(reinterpret_cast<unsigned char *>(sums) + SUMS_BYTES);
  unsigned long long *empty = full + STAGES;
  unsigned long long *ready = empty + STAGES, *done = ready + 1; // SPLIT_K > 1

  const int warpgroup = threadIdx.x / 128, thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], CONSUMERS * CLUSTER); // one arrival per consumer of the cluster
    }
    if (SPLIT_K > 1) {
      barrier_init(ready, CONSUMERS * SPLIT_K);
      barrier_init(done, CONSUMERS * SPLIT_K);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (CLUSTER * SPLIT_K > 1)
    cluster_sync();
  else
    __syncthreads();
  // gemm.cpp launches with LaunchConfig::overlap_previous: the making of the barriers above may
  // run while the stream's previous kernel finishes; the next kernel's blocks may start as soon as
  // all of this grid's have got here; every global access below (A, B, C) waits for the previous
  // kernel's results.
  kjit::let_dependents_start();
  kjit::wait_for_previous_grid();

  // A cluster takes pairs of tiles: super-tiles of CLUSTER_M x CLUSTER_N tiles in the grouped
  // order, its blocks one tile each. A pair's tile past the matrix is still computed (its peer
  // needs its half of the shared copies), on the zeros the copies fill, and not stored.
  const unsigned rank = CLUSTER * SPLIT_K > 1 ? cluster_rank() : 0;
  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BLOCK_N - 1) / BLOCK_N;
  const int pairs_m = (tiles_m + CLUSTER_M - 1) / CLUSTER_M,
            pairs_n = (tiles_n + CLUSTER_N - 1) / CLUSTER_N;
  const int pairs = pairs_m * pairs_n;
  // This block's K steps: all of them, or every SPLIT_K-th from its rank (perhaps none). Taken
  // in turns rather than in ranges, the cluster's blocks read adjacent bytes of each row of B at
  // once: SPLIT_K times longer runs of each row in flight (a little faster, BENCHMARKS.md).
  const int k_blocks = (k + BK - 1) / BK, kb_begin = SPLIT_K > 1 ? static_cast<int>(rank) : 0;
  const int first_pair = blockIdx.x / (CLUSTER * SPLIT_K),
            pair_stride = gridDim.x / (CLUSTER * SPLIT_K);
  const auto place = [&](int t, int &tile_m, int &tile_n) {
    place_tile<GROUP_M>(t, pairs_m, pairs_n, tile_m, tile_n);
    tile_m = tile_m * CLUSTER_M + (CLUSTER_M > 1 ? rank : 0);
    tile_n = tile_n * CLUSTER_N + (CLUSTER_N > 1 ? rank : 0);
  };
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (thread == 0) {
      constexpr unsigned short BOTH = 3; // the cluster's blocks, for the multicasts
      int s = 0;
      unsigned phase = 0;
      for (int t = first_pair; t < pairs; t += pair_stride) {
        int tile_m, tile_n;
        place(t, tile_m, tile_n);
        for (int kb = kb_begin; kb < k_blocks; kb += SPLIT_K) {
          barrier_wait(&empty[s], phase ^ 1); // a fresh barrier's previous phase counts as done
          unsigned char *a_stage = stages + s * STAGE, *b_stage = a_stage + A_BYTES;
          if (CLUSTER_N > 1) { // the pair's rows of A are the same: half each, to both
            barrier_expect_bytes(&full[s], STAGE); // this block's copies and the peer's
            multicast_box(a_stage + rank * (A_BYTES / 2), &map_a, &full[s], kb * BK,
                          tile_m * BM + rank * (BM / 2), BOTH);
          } else {
            // A's tile in halves of 64 rows, the second only where it holds a row of A: the copy
            // engine fills rows past the matrix slowly (a few rows of A took 1.5 times as long
            // as 128), and the consumer of those rows stores nothing. BLOCK_M 64: one box.
            const bool second_half = CONSUMERS == 2 && tile_m * BM + BM / 2 < m;
            barrier_expect_bytes(&full[s],
                                 CONSUMERS == 1 || second_half ? STAGE : STAGE - A_BYTES / 2);
            copy_box(a_stage, &map_a, &full[s], kb * BK, tile_m * BM);
            if (second_half)
              copy_box(a_stage + A_BYTES / 2, &map_a, &full[s], kb * BK, tile_m * BM + BM / 2);
          }
          if (B_KMAJOR) {
            if (CLUSTER_M > 1) // the pair's columns of B are the same: half each, to both
              multicast_box(b_stage + rank * (B_BYTES / 2), &map_b, &full[s], kb * BK,
                            tile_n * BLOCK_N + rank * (BLOCK_N / 2), BOTH);
            else
              copy_box(b_stage, &map_b, &full[s], kb * BK, tile_n * BLOCK_N);
          } else {
            constexpr int BLOCKS = BLOCK_N / 64 / CLUSTER_M; // column blocks this block copies
#pragma unroll
            for (int i = 0; i < BLOCKS; ++i) {
              const int j = (CLUSTER_M > 1 ? rank * BLOCKS : 0) + i;
              if (CLUSTER_M > 1)
                multicast_box(b_stage + j * COLUMN_BLOCK, &map_b, &full[s],
                              tile_n * BLOCK_N + j * 64, kb * BK, BOTH);
              else
                copy_box(b_stage + j * COLUMN_BLOCK, &map_b, &full[s], tile_n * BLOCK_N + j * 64,
                         kb * BK);
            }
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else if (warpgroup <= CONSUMERS) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1, rows = consumer * 64; // this consumer's rows of the tile
    const int warp = thread / 32, lane = thread % 32;
    // The stage's slot is free for this cluster's producers once this consumer is done with it.
    const auto release = [&](int stage) {
      if (thread != 0)
        return;
      if (CLUSTER > 1) {
        for (unsigned block = 0; block < CLUSTER; ++block)
          barrier_arrive_in(&empty[stage], block);
      } else {
        barrier_arrive(&empty[stage]);
      }
    };
    float acc[BLOCK_N / 2];
    int s = 0;
    unsigned phase = 0;
    int buffer = 0; // EPILOGUE 1: this consumer's buffer to write next
    for (int t = first_pair; t < pairs; t += pair_stride) {
      int tile_m, tile_n;
      place(t, tile_m, tile_n);
      int previous = -1;
      if (kb_begin >= k_blocks) // a split with no K: its sums are zeros
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i)
          acc[i] = 0;
      for (int kb = kb_begin; kb < k_blocks; kb += SPLIT_K) {
        barrier_wait(&full[s], phase);
        const unsigned char *a_stage = stages + s * STAGE + rows * 128;
        const unsigned char *b_stage = stages + s * STAGE + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const unsigned long long a = descriptor(a_stage + kk * 32, 16, 1024);
          const unsigned long long b =
              B_KMAJOR ? descriptor(b_stage + kk * 32, 16, 1024)
                       : descriptor(b_stage + kk * 16 * 128, COLUMN_BLOCK, 1024);
          WgmmaShared<T, BLOCK_N, B_KMAJOR ? 0 : 1>::run(acc, a, b, kb > kb_begin || kk > 0);
        }
        wgmma_commit();
        wgmma_wait<1>(); // the previous stage's batch is done: release it
        if (previous >= 0)
          release(previous);
        previous = s;
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
      if (previous >= 0)
        release(previous);
      // Register 4j + 2h + e of m64nNk16's accumulators holds row 16 * warp + lane / 4 + 8h,
      // column 8j + 2 (lane % 4) + e.
      const int first_row = tile_m * BM + rows;
      if (SPLIT_K > 1) {
        // Float4 q of a thread's sums (j = q) at sums[(consumer * Q + q) * 128 + thread]: the
        // same place in every block of the cluster, a warp's 16-byte stores side by side.
        constexpr int Q = BLOCK_N / 8;
        const int tiles_done = (t - first_pair) / pair_stride;
        if (tiles_done > 0 && thread == 0) // the peers have read the previous tile's sums
          barrier_wait_cluster(done, (tiles_done - 1) & 1);
        named_barrier_sync(1 + consumer, 128);
#pragma unroll
        for (int q = 0; q < Q; ++q)
          sums[(consumer * Q + q) * 128 + thread] =
              make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
        named_barrier_sync(1 + consumer, 128);
        if (thread == 0)
          for (unsigned block = 0; block < SPLIT_K; ++block)
            barrier_arrive_released_in(ready, block);
        barrier_wait_cluster(ready, tiles_done & 1);
        // This block's share: of this consumer's float4s (warp, q), those whose index
        // warp * Q + q is rank modulo SPLIT_K (the same for a whole warp; Q may be below SPLIT_K).
        const int row0 = first_row + warp * 16 + lane / 4;
#pragma unroll
        for (int q = 0; q < Q; ++q) {
          if ((warp * Q + q) % SPLIT_K != static_cast<int>(rank))
            continue;
          float4 total = make_float4(0, 0, 0, 0);
#pragma unroll
          for (unsigned block = 0; block < SPLIT_K; ++block) {
            const float4 part = load_from_block(sums + (consumer * Q + q) * 128 + thread, block);
            total.x += part.x;
            total.y += part.y;
            total.z += part.z;
            total.w += part.w;
          }
          const int column = tile_n * BLOCK_N + 8 * q + 2 * (lane % 4);
          store_pair(row0, column, total.x, total.y);
          store_pair(row0 + 8, column, total.z, total.w);
        }
        named_barrier_sync(1 + consumer, 128); // every thread has read the peers' sums
        if (thread == 0)
          for (unsigned block = 0; block < SPLIT_K; ++block)
            barrier_arrive_released_in(done, block);
      } else if (EPILOGUE) {
        if (first_row < m) // the same for the whole warpgroup
          store_boxes<T, BLOCK_N>(
              &map_c, c_boxes + consumer * 2 * C_BOX, buffer,
              [&](int at, float &v0, float &v1) {
                v0 = acc[at];
                v1 = acc[at + 1];
              },
              first_row, tile_n * BLOCK_N, n, 1 + consumer, thread);
      } else {
        const int row0 = first_row + warp * 16 + lane / 4;
        const int column0 = tile_n * BLOCK_N + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            store_pair(row0 + 8 * h, column0 + 8 * j, acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      }
    }
    if (EPILOGUE && thread == 0)
      bulk_wait_read<0>(); // the boxes' shared memory lives until the copy engine has read it
  }
  if (CLUSTER * SPLIT_K > 1)
    cluster_sync(); // no block leaves while a peer may still copy into it, arrive on it or read it
}

#endif

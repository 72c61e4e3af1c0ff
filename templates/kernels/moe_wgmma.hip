// The grouped GEMM of a mixture-of-experts layer on Hopper tensor cores (sm_90a: wgmma, TMA,
// setmaxnreg), for half and bfloat16, in one launch for every expert:
//
//   C[r, :] = A[r, :] @ W[e(r)]^T  for each row r of A, e(r) = block_experts[r / 128]
//
// The rows of A are the token-expert pairs sorted by expert, each expert's run padded to 128 rows
// (moe_routing.hip's moe_align), so a 128-row tile belongs to one expert; totals[0] counts the
// tiles, on the device (no host synchronisation). Where they come from:
//   GATHER 0: A [rows, k] holds them (moe_gather's output, whose padding rows hold whatever was
//             there, or the gated rows for the down projection), read through the tensor map
//             map_a in boxes of 64 rows; a padding row of A reaches only its own row of C, which
//             nothing reads;
//   GATHER 1: row r is the token row x[sorted_pairs[r] / top_k] (zeros for padding), copied by
//             the producer warpgroup's 128 threads with cp.async, one row each, into the layout
//             TMA's 128-byte swizzle gives (map_a is unused): no gathered copy of the tokens.
// The weights of all experts lie in one row-major tensor, nn.Linear's layout per expert, read
// through one tensor map of its rows:
//   GATED 0: W [experts * n, k]; C [rows, n] (the down projection);
//   GATED 1: W [experts * 2n, k], each expert's n gate rows then its n up rows (vLLM's w13);
//            C [rows, n] = silu(A @ gate^T) * (A @ up^T), silu_and_mul in the epilogue.
// A gated tile copies BLOCK_N gate rows and the BLOCK_N up rows of the same columns side by side:
// one wgmma of 2 BLOCK_N columns, after which each thread holds gate column c in accumulator j and
// up column c in accumulator j + BLOCK_N / 8 (register 4j + 2h + e of m64nNk16 is row
// 16 warp + lane / 4 + 8h, column 8j + 2 (lane % 4) + e), so the epilogue needs no exchange.
// Where n is not a multiple of BLOCK_N, a tile's last rows of W run into the next rows of the
// tensor (the up half, the next expert); their columns lie past n and are not stored.
//
// The pipeline is gemm_wgmma's (see there): a producer warpgroup issues the copies into a ring of
// STAGES stages guarded by "full" and "empty" mbarriers, the grid is persistent over the tiles in
// GROUP_M-row groups (taken in a static or a dynamic order, below). The two consumer warpgroups
// share the tiles one of two ways:
//   PINGPONG 0: both take each tile, 64 rows each; the tensor cores idle while they store it.
//   PINGPONG 1: they take the block's tiles in turns, all 128 rows each (two wgmma of 64 rows,
//               a wgmma of 128 columns only). The producer fills the ring in tile order, so one
//               consumer's tile is loaded only as the other's mainloop ends: each consumer's
//               epilogue (the silu_and_mul and the stores) runs under the other's MMAs.
// They store C one of two ways:
//   EPILOGUE 0: pairs from registers, each warp's store 8 rows of 16 bytes.
//   EPILOGUE 1: through shared memory: each consumer writes 64 x 64 boxes of its rows in the
//               128-byte swizzle (conflict-free) into one of its two buffers, and the copy engine
//               stores the box to C (through map_c, whose bounds drop columns past n) while the
//               next is written.
// SKIP_PADDING 1 (PINGPONG 0): in an expert's last tile whose pairs end within its first 64 rows
// (moe_align places an expert's pairs first, then -1 for padding), consumer 1's rows are all
// padding: it passes over the tile's stages (waiting for each and releasing it, as the ring's
// protocol asks) with no wgmma and no stores, so the tile takes consumer 0's MMAs alone. C's
// padding rows of such a tile are left as they were: nothing reads them (the down GEMM's rows of
// them feed only its own padding rows, which it skips alike; moe_combine reads the pairs' rows).
#if KJIT_HIP
#error "kjit moe_gemm_wgmma: wgmma and TMA are NVIDIA Hopper's (sm_90a)"
#else
#include "kjit/hopper.h"

namespace kjit_moe_gemm {

// Columns [column, column + 64) of one row of A (`from`; a padding row where !present) into
// its 128 bytes of a stage at `to`, as TMA's 128-byte swizzle lays them: 16-byte chunk c of row
// r at chunk c ^ (r % 8). Chunks past k, and a padding row's, are zeros: a source size of 0
// reads nothing (from stays a valid address all the same).
template <typename T>
__device__ inline void copy_row(unsigned char *to, const T *from, bool present, int column, int k,
                                int row) {
#pragma unroll
  for (int chunk = 0; chunk < 8; ++chunk) {
    const int at = column + chunk * 8; // k is a multiple of 8: a chunk is all in or all out
    const bool inside = present && at < k;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                     kjit::hopper::shared_address(to + ((chunk ^ (row % 8)) * 16))),
                 "l"(inside ? from + at : from), "r"(inside ? 16 : 0)
                 : "memory");
  }
}

// Whether consumer 1 passes over the second half of the BM rows of tile tile_m: SKIP_PADDING with
// PINGPONG 0, where they are all padding (moe_align places an expert's pairs first, then -1).
// The producer copies those rows of A only where it does not, so both ask here.
template <int SKIP_PADDING, int PINGPONG, int BM>
__device__ inline bool second_half_skipped(const int *sorted_pairs, int tile_m) {
  return SKIP_PADDING && !PINGPONG && sorted_pairs[tile_m * BM + BM / 2] < 0;
}

// The mbarrier's pending count drops by one when this thread's earlier cp.async copies land.
__device__ inline void arrive_when_copied(unsigned long long *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                   kjit::hopper::shared_address(bar))
               : "memory");
}

// x * sigmoid(x) with the hardware's approximate exp and reciprocal (activation.hip's FAST form):
// the result is rounded to 16 bits. x far below 0 gives -0 (exp overflows, its reciprocal is 0).
__device__ inline float silu(float x) {
  return x * kjit::fast_reciprocal(1.0f + kjit::fast_exp(-x));
}

// The values of C's columns from accumulators at and at + 1: those (GATED: silu of those, the
// gate's, times the up columns', UP registers past them).
template <int GATED, int UP, int ACCUMULATORS>
__device__ inline void output_pair(const float (&acc)[ACCUMULATORS], int at, float &v0, float &v1) {
  v0 = acc[at];
  v1 = acc[at + 1];
  if (GATED) {
    v0 = silu(v0) * acc[UP + at];
    v1 = silu(v1) * acc[UP + at + 1];
  }
}

// EPILOGUE 0: stores the 64 rows [row0 - lane / 4 - 16 warp, ...) of a tile that one warpgroup's
// wgmma accumulated in acc (register 4j + 2h + e of m64nNk16 is row 16 warp + lane / 4 + 8h, column
// 8j + 2 (lane % 4) + e); GATED: C = silu(gate) * up, the up column's accumulator BLOCK_N / 2
// past the gate's. n is even (the tensor maps' rows are 16-byte multiples), so a pair starting
// inside C ends inside it: one 4-byte store.
template <typename T, int BLOCK_N, int GATED, int ACCUMULATORS>
__device__ inline void store_rows(T *c, const float (&acc)[ACCUMULATORS], long long row0,
                                  int column0, int n) {
#pragma unroll
  for (int j = 0; j < BLOCK_N / 8; ++j) {
    const int column = column0 + 8 * j;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float v0, v1;
      output_pair<GATED, 4 * (BLOCK_N / 8)>(acc, 4 * j + 2 * h, v0, v1);
      if (column < n)
        *reinterpret_cast<typename kjit::Pairs<T>::type *>(c + (row0 + 8 * h) * n + column) =
            kjit::Pairs<T>::pack(v0, v1);
    }
  }
}

} // namespace kjit_moe_gemm

template <typename T, int BLOCK_N, int STAGES, int GATED, int GROUP_M, int GATHER, int PINGPONG,
          int EPILOGUE, int SKIP_PADDING>
__global__ void __launch_bounds__(384, 1)
    moe_gemm_wgmma(T *KJIT_RESTRICT c, const __grid_constant__ kjit::TensorMap map_a,
                   const __grid_constant__ kjit::TensorMap map_b,
                   const int *KJIT_RESTRICT block_experts, const int *KJIT_RESTRICT totals, int n,
                   int k, const T *KJIT_RESTRICT x, const int *KJIT_RESTRICT sorted_pairs,
                   int top_k, int *KJIT_RESTRICT schedule,
                   const __grid_constant__ kjit::TensorMap map_c) {
  using namespace kjit::hopper;
  constexpr int BM = 128, BK = 64; // BK: one 128-byte swizzle row of 16-bit elements
  constexpr int WN = GATED ? 2 * BLOCK_N : BLOCK_N; // wgmma's N
  static_assert(WN == 128 || WN == 256, "wgmma N of 128 or 256");
  static_assert(!PINGPONG || WN == 128,
                "a consumer's 128 rows of 256 columns outgrow its registers");
  constexpr int A_BYTES = BM * BK * 2, B_BYTES = WN * BK * 2, STAGE = A_BYTES + B_BYTES;
  // Dynamic shared memory: STAGES stages, 1024-byte aligned (the swizzle's period), EPILOGUE 1's
  // two buffers of 64 x 64 per consumer, then the barriers. The launch asks for the alignment's
  // slack (moe.cpp).
  constexpr int BOX = 64 * 64 * 2, EPILOGUE_BYTES = EPILOGUE ? 2 * 2 * BOX : 0;
  extern __shared__ unsigned char shared_raw[];
  unsigned char *stages = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull);
  unsigned char *epilogue = stages + STAGES * STAGE;
  unsigned long long *full = reinterpret_cast<unsigned long long *>(epilogue + EPILOGUE_BYTES);
  unsigned long long *empty = full + STAGES;
  // The tiles' order: static (block b takes tiles b, b + gridDim.x, ...) or, where `schedule` is
  // given (GATHER 0; the launch zeroes it), dynamic: the producer takes each next tile from the
  // counter, so that the blocks running at once stay a window of consecutive tiles, and hands it
  // to the consumers through a ring of two slots (tile_full, tile_empty).
  unsigned long long *tile_full = empty + STAGES, *tile_empty = tile_full + 2;
  volatile int *tile_ids = reinterpret_cast<volatile int *>(tile_empty + 2);
  const bool dynamic = !GATHER && schedule != nullptr;

  const int warpgroup = threadIdx.x / 128, thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&full[s], GATHER ? 1 + 128 : 1); // and each producer thread's rows
      barrier_init(&empty[s], PINGPONG ? 1 : 2);    // one arrival per consumer of the tile
    }
    for (int slot = 0; slot < 2; ++slot) {
      barrier_init(&tile_full[slot], 1);
      barrier_init(&tile_empty[slot], 256); // every consumer thread has read the slot
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int tiles_m = totals[0], tiles_n = (n + BLOCK_N - 1) / BLOCK_N;
  const int tiles = tiles_m * tiles_n, k_blocks = (k + BK - 1) / BK;
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (GATHER || thread == 0) { // thread 0 issues the TMA copies, every thread its row of A
      int s = 0, slot = 0;
      unsigned phase = 0, tile_phase = 0;
      for (int i = 0;; ++i) {
        int t = blockIdx.x + i * gridDim.x;
        if (dynamic) {
          t = atomicAdd(schedule, 1);
          barrier_wait(&tile_empty[slot], tile_phase ^ 1);
          tile_ids[slot] = t;
          asm volatile("" ::: "memory"); // written before the arrival
          barrier_arrive(&tile_full[slot]);
          if (++slot == 2) {
            slot = 0;
            tile_phase ^= 1;
          }
        }
        if (t >= tiles)
          break;
        int tile_m, tile_n;
        place_tile<GROUP_M>(t, tiles_m, tiles_n, tile_m, tile_n);
        const int expert = block_experts[tile_m];
        const int w_row = expert * (GATED ? 2 * n : n) + tile_n * BLOCK_N;
        const int pair = GATHER ? sorted_pairs[tile_m * BM + thread] : -1; // -1: padding
        const T *row = x + static_cast<long long>(pair < 0 ? 0 : pair / top_k) * k;
        // GATHER 0 copies A's tile in halves of 64 rows, the second only where a consumer reads
        // it (thread 0 issues the copies).
        const bool second_half =
            GATHER || thread != 0 ||
            !kjit_moe_gemm::second_half_skipped<SKIP_PADDING, PINGPONG, BM>(sorted_pairs, tile_m);
        for (int kb = 0; kb < k_blocks; ++kb) {
          barrier_wait(&empty[s], phase ^ 1); // a fresh barrier's previous phase counts as done
          unsigned char *a_stage = stages + s * STAGE, *b_stage = a_stage + A_BYTES;
          if (thread == 0) {
            barrier_expect_bytes(&full[s], GATHER        ? B_BYTES
                                           : second_half ? STAGE
                                                         : STAGE - A_BYTES / 2);
            if (!GATHER)
              copy_box(a_stage, &map_a, &full[s], kb * BK, tile_m * BM);
            if (!GATHER && second_half)
              copy_box(a_stage + A_BYTES / 2, &map_a, &full[s], kb * BK, tile_m * BM + BM / 2);
            copy_box(b_stage, &map_b, &full[s], kb * BK, w_row);
            if (GATED) // the up rows of the same columns, after the gate rows
              copy_box(b_stage + BLOCK_N * 128, &map_b, &full[s], kb * BK, w_row + n);
          }
          if (GATHER) {
            kjit_moe_gemm::copy_row(a_stage + thread * 128, row, pair >= 0, kb * BK, k, thread);
            kjit_moe_gemm::arrive_when_copied(&full[s]);
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int consumer = warpgroup - 1;
    const int warp = thread / 32, lane = thread % 32;
    // PINGPONG 0: this consumer's 64 rows of each tile; 1: both halves of its own tiles.
    constexpr int HALVES = PINGPONG ? 2 : 1;
    float acc[HALVES][WN / 2];
    int buffer = 0; // EPILOGUE 1: this consumer's buffer to write next
    int s = 0, slot = 0;
    unsigned phase = 0, tile_phase = 0;
    for (int i = 0;; ++i) {
      int t = blockIdx.x + i * gridDim.x;
      if (dynamic) {
        barrier_wait(&tile_full[slot], tile_phase);
        asm volatile("" ::: "memory"); // the slot is read after the wait
        t = tile_ids[slot];
        barrier_arrive(&tile_empty[slot]);
        if (++slot == 2) {
          slot = 0;
          tile_phase ^= 1;
        }
      }
      if (t >= tiles) {
        if (EPILOGUE && thread == 0) // the stores read shared memory until they are done
          bulk_wait<0>();
        break;
      }
      if (PINGPONG && i % 2 != consumer) { // the other consumer's tile: pass over its stages
        const int passed = s + k_blocks;
        s = passed % STAGES;
        phase ^= (passed / STAGES) & 1;
        continue;
      }
      int tile_m, tile_n;
      place_tile<GROUP_M>(t, tiles_m, tiles_n, tile_m, tile_n);
      const int rows = PINGPONG ? 0 : consumer * 64; // the first of this consumer's rows
      if (consumer == 1 &&
          kjit_moe_gemm::second_half_skipped<SKIP_PADDING, PINGPONG, BM>(sorted_pairs, tile_m)) {
        for (int kb = 0; kb < k_blocks; ++kb) { // all padding: only the ring's protocol
          barrier_wait(&full[s], phase); // the stage's use, before this arrival counts for it
          if (thread == 0)
            barrier_arrive(&empty[s]);
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
        continue;
      }
      int previous = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        barrier_wait(&full[s], phase);
        if (GATHER) // the rows cp.async wrote (the generic proxy) before wgmma reads them
          fence_async_shared();
        const unsigned char *a_stage = stages + s * STAGE + rows * 128;
        const unsigned char *b_stage = stages + s * STAGE + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
          for (int half = 0; half < HALVES; ++half)
            WgmmaShared<T, WN, 0>::run(acc[half],
                                       descriptor(a_stage + half * 64 * 128 + kk * 32, 16, 1024),
                                       descriptor(b_stage + kk * 32, 16, 1024), kb > 0 || kk > 0);
        wgmma_commit();
        wgmma_wait<1>(); // the previous stage's batch is done: release it
        if (previous >= 0 && thread == 0)
          barrier_arrive(&empty[previous]);
        previous = s;
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      wgmma_wait<0>();
      if (previous >= 0 && thread == 0)
        barrier_arrive(&empty[previous]);
      const long long row0 = static_cast<long long>(tile_m) * BM + rows + warp * 16 + lane / 4;
      const int column0 = tile_n * BLOCK_N + 2 * (lane % 4);
#pragma unroll
      for (int half = 0; half < HALVES; ++half)
        if (EPILOGUE)
          store_boxes<T, BLOCK_N>(
              &map_c, epilogue + consumer * 2 * BOX, buffer,
              [&](int at, float &v0, float &v1) {
                kjit_moe_gemm::output_pair<GATED, 4 * (BLOCK_N / 8)>(acc[half], at, v0, v1);
              },
              tile_m * BM + rows + half * 64, tile_n * BLOCK_N, n, 1 + consumer, thread);
        else
          kjit_moe_gemm::store_rows<T, BLOCK_N, GATED>(c, acc[half], row0 + half * 64, column0, n);
    }
  }
}

#endif

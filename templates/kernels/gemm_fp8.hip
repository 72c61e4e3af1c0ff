// D = (A x scale_a) @ (B x scale_b)^T on Hopper tensor cores (sm_90a: wgmma on fp8, TMA,
// setmaxnreg): A e4m3 [M, K] row-major, B e4m3 [N, K] row-major (an nn.Linear weight: both
// operands K-major, the only layout wgmma takes for fp8), D bfloat16 [M, N] row-major. SCALING
// says how the float scales apply:
//   0 per tensor: scale_a[0] and scale_b[0] (torch._scaled_mm's scalar scales);
//   1 row-wise: scale_a[M] per row of A, scale_b[N] per row of B (torch._scaled_mm's [M, 1] and
//     [1, N]);
//   2 blocks, DeepSeek-V3's format: scale_a [M, K / 128] for each 1 x 128 block of A, scale_b
//     [ceil(N / 128), K / 128] for each 128 x 128 block of B; K a multiple of 128.
// For 0 and 1 the products of all of K add up in wgmma's accumulators, and the scales multiply
// the sums once. For 2 the scales change along K, so each 128 of K is summed apart by wgmma
// (from zero) and added, scaled, to float accumulators in registers: the promotion DeepGEMM
// makes, which also keeps long K sums from the tensor cores' narrower fp8 accumulation.
//
// A and B arrive as tensor maps of bytes with the 128-byte swizzle, boxes of 64 x 128 (A) and
// BLOCK_N / CLUSTER_M x 128 (B): one stage is 128 of K, one swizzle row, and one scale block.
// Reads past an edge fill zeros, so ragged M, N and K add nothing; stores are checked against m
// and n. BLOCK_N need not divide 128 (tiles of 160 columns cover 7168 in 45 tiles, whole waves
// on 132 multiprocessors): a tile's columns then meet two blocks of B's scales, and each
// 8-column group of the accumulators takes its own.
//
// Three warpgroups, a persistent grid and a grouped tile order, as in gemm_wgmma.hip:
// warpgroup 0 gives up registers and one of its threads issues the copies into a ring of STAGES
// stages ("full" and "empty" mbarriers); warpgroups 1 and 2 take 64 rows each of a 128 x
// BLOCK_N tile, one wgmma m64nBLOCK_Nk32 per 32 of K. CLUSTER_M = 2 runs clusters of two blocks
// on vertically adjacent tiles: each copies half of B's shared columns into both blocks
// (multicast), so a quarter (BLOCK_N 128) to over a third (160) fewer bytes leave L2 per tile,
// and a stage is free once the consumers of both blocks have released it.
#if KJIT_HIP
#error "kjit gemm_fp8: wgmma and TMA are NVIDIA Hopper's (sm_90a)"
#else
#include "kjit/hopper.h"
#include "kjit/hopper_fp8.h"

namespace kjit_gemm_fp8 {

constexpr int BM = 128, BK = 128; // BK: 128 bytes of e4m3, one swizzle row and one scale block

using kjit::hopper::WgmmaE4m3;

// A's fragments of one stage's four k32 steps on this consumer's 64 rows (`a_rows`, rows of 128
// bytes in the 128-byte swizzle, a multiple of 8 rows from the 1024-aligned stage), as
// WgmmaE4m3Registers takes them: lane l of warp w gives ldmatrix the row 16w + l % 8 + 8 (l / 8 %
// 2) and the 16 bytes 16 (l / 16) of each step, whose 16-byte chunk the swizzle moved to its index
// xor the row's (l % 8).
__device__ inline void load_a_fragments(unsigned (&a)[BK / 32][4], const unsigned char *a_rows,
                                        int warp, int lane) {
  const int row = 16 * warp + lane % 8 + 8 * (lane / 8 % 2);
  const unsigned base = kjit::hopper::shared_address(a_rows + row * BK);
#pragma unroll
  for (int kk = 0; kk < BK / 32; ++kk) {
    const int chunk = (2 * kk + lane / 16) ^ (lane % 8);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(a[kk][0]), "=r"(a[kk][1]), "=r"(a[kk][2]), "=r"(a[kk][3])
                 : "r"(base + 16 * chunk));
  }
}

// One stage's four k32 steps on this consumer's 64 rows: d = (or +=) A B.
template <int BLOCK_N>
__device__ inline void stage_product(float (&d)[BLOCK_N / 2], const unsigned char *a_rows,
                                     const unsigned char *b_stage, bool accumulate) {
#pragma unroll
  for (int kk = 0; kk < BK / 32; ++kk)
    WgmmaE4m3<BLOCK_N>::run(d, kjit::hopper::descriptor(a_rows + kk * 32, 16, 1024),
                            kjit::hopper::descriptor(b_stage + kk * 32, 16, 1024),
                            accumulate || kk > 0);
}

// The 128-column blocks of B's scales that the 8-column groups of a BLOCK_N-wide tile meet: at
// most two when the tile's first column, a multiple of gcd(BLOCK_N, 128), leaves room for it.
__device__ constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
template <int BLOCK_N> __device__ constexpr bool within_two_scale_blocks() {
  return BK - gcd(BLOCK_N, BK) + BLOCK_N <= 2 * BK;
}

} // namespace kjit_gemm_fp8

// One block per multiprocessor: 40 registers to the producer, 232 to each consumer.
// EPILOGUE 0: each consumer stores its 64 rows of D from registers, pairs of columns (4 bytes) at
// a time; 1: through shared memory, in boxes of 64 x 64 into two 8 KiB buffers per consumer that
// the copy engine stores through map_d (kjit::hopper::store_boxes), so that the consumer's next
// tile starts while the engine writes.
template <int BLOCK_N, int STAGES, int SCALING, int GROUP_M, int CLUSTER_M, int PINGPONG,
          int OVERLAP, int A_REGISTERS, int EPILOGUE>
__global__ void __launch_bounds__(384, 1)
    gemm_fp8(bfloat16 *KJIT_RESTRICT d, const float *KJIT_RESTRICT scale_a,
             const float *KJIT_RESTRICT scale_b, const __grid_constant__ kjit::TensorMap map_a,
             const __grid_constant__ kjit::TensorMap map_b,
             const __grid_constant__ kjit::TensorMap map_d, int m, int n, int k) {
  using namespace kjit::hopper;
  using namespace kjit_gemm_fp8;
  static_assert(BLOCK_N % 16 == 0 && BLOCK_N >= 64 && BLOCK_N <= 256,
                "wgmma N a multiple of 16 (halves of whole swizzle atoms) from 64 to 256");
  static_assert(SCALING >= 0 && SCALING <= 2, "SCALING 0 (tensor), 1 (rows) or 2 (blocks)");
  static_assert(SCALING != 2 || BLOCK_N == 256 ||
                    (BLOCK_N <= 160 && within_two_scale_blocks<BLOCK_N>()),
                "block scales: a tile's columns meet at most two blocks of B's scales, and the "
                "promoted sums need BLOCK_N registers a thread (256: in halves, below)");
  static_assert(CLUSTER_M == 1 || CLUSTER_M == 2, "clusters of 1 or 2 blocks along M");
  static_assert(EPILOGUE == 0 || (EPILOGUE == 1 && BLOCK_N % 64 == 0),
                "EPILOGUE 1 stores boxes of 64 columns: BLOCK_N a multiple of 64");
  static_assert(
      !OVERLAP || SCALING != 2 || BLOCK_N <= 128,
      "OVERLAP keeps two k-blocks' sums beside the promoted ones: BLOCK_N of at most 128");
  // Block scales at 256 columns: each k-block is multiplied in two halves of 128 columns, one
  // scale block of B each, and each half's 64 sums a thread are promoted before the next half
  // is issued; 128 promoted sums and 64 of a half fit a consumer's 232 registers where a whole
  // k-block's 128 would not. The tile reads B's stage once per k-block, as per tensor's 256
  // columns do (BENCHMARKS.md: 1447 TFLOP/s there against 1204-1258 at 128 columns).
  constexpr bool HALVES = SCALING == 2 && BLOCK_N == 256;
  constexpr int BATCH_N = HALVES ? BLOCK_N / 2 : BLOCK_N; // the columns of one wgmma batch
  // A_REGISTERS: the halves take A's k-block from 16 registers a thread, loaded once from shared
  // memory (ldmatrix) for both, instead of each half's wgmma reading it there again.
  static_assert(!A_REGISTERS || HALVES, "A_REGISTERS serves block scales at 256 columns");
  // The launch gives each of the 384 threads 168 registers; the consumers' setmaxnreg.inc waits
  // until the producer's dec has freed what it asks for, forever if that is more (240 against 32
  // hung on the H100, BENCHMARKS.md).
  constexpr int PRODUCER_REGISTERS = 40, CONSUMER_REGISTERS = 232, LAUNCH_REGISTERS = 168;
  static_assert(2 * (CONSUMER_REGISTERS - LAUNCH_REGISTERS) <=
                    LAUNCH_REGISTERS - PRODUCER_REGISTERS,
                "the consumers take more registers than the producer gives up");
  constexpr int A_BYTES = BM * BK, B_BYTES = BLOCK_N * BK, STAGE = A_BYTES + B_BYTES;
  // Dynamic shared memory: STAGES stages, 1024-byte aligned (the swizzle's period), EPILOGUE 1's
  // two 64 x 64 buffers per consumer, then the barriers. The launch asks for the alignment's
  // slack (gemm_fp8.cpp).
  constexpr int BOX = 64 * 64 * 2, EPILOGUE_BYTES = EPILOGUE ? 2 * 2 * BOX : 0;
  extern __shared__ unsigned char shared_raw[];
  unsigned char *stages = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull);
  unsigned char *epilogue = stages + STAGES * STAGE;
  unsigned long long *full = reinterpret_cast<unsigned long long *>(epilogue + EPILOGUE_BYTES);
  unsigned long long *empty = full + STAGES;

  const int warpgroup = threadIdx.x / 128, thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], 2 * CLUSTER_M); // one arrival per consumer of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (CLUSTER_M > 1)
    cluster_sync();
  else
    __syncthreads();
  // gemm_fp8.cpp launches with LaunchConfig::overlap_previous: the making of the barriers above
  // may run while the stream's previous kernel finishes; the next kernel's blocks may start as
  // soon as all of this grid's have got here; every global access below (A, B, the scales, D)
  // waits for the previous kernel's results.
  kjit::let_dependents_start();
  kjit::wait_for_previous_grid();

  // A cluster takes pairs of vertically adjacent tiles in the grouped order, one each; the pair
  // shares B's columns, each block copying half of them into both. A pair's tile past the
  // matrix is still computed (its peer needs its half of the copies), on the zeros the copies
  // fill, and not stored.
  const unsigned rank = CLUSTER_M > 1 ? cluster_rank() : 0;
  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BLOCK_N - 1) / BLOCK_N;
  const int pairs_m = (tiles_m + CLUSTER_M - 1) / CLUSTER_M, pairs = pairs_m * tiles_n;
  const int k_blocks = (k + BK - 1) / BK;
  const int first_pair = blockIdx.x / CLUSTER_M, pair_stride = gridDim.x / CLUSTER_M;
  const auto place = [&](int t, int &tile_m, int &tile_n) {
    place_tile<GROUP_M>(t, pairs_m, tiles_n, tile_m, tile_n);
    tile_m = tile_m * CLUSTER_M + static_cast<int>(rank);
  };
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGISTERS));
    if (thread == 0) {
      int s = 0;
      unsigned phase = 0;
      for (int t = first_pair; t < pairs; t += pair_stride) {
        int tile_m, tile_n;
        place(t, tile_m, tile_n);
        for (int kb = 0; kb < k_blocks; ++kb) {
          barrier_wait(&empty[s], phase ^ 1); // a fresh barrier's previous phase counts as done
          unsigned char *a_stage = stages + s * STAGE, *b_stage = a_stage + A_BYTES;
          // A's tile in halves of 64 rows, the second only where it holds a row of A: the copy
          // engine fills rows past the matrix slowly (at m = 64 the kernel took 1.8 times as
          // long as at m = 128, BENCHMARKS.md), and the consumer of those rows stores nothing.
          // With a cluster the stage's bytes are this block's copies and the peer's.
          const bool second_half = tile_m * BM + BM / 2 < m;
          barrier_expect_bytes(&full[s], second_half ? STAGE : STAGE - A_BYTES / 2);
          copy_box(a_stage, &map_a, &full[s], kb * BK, tile_m * BM);
          if (second_half)
            copy_box(a_stage + A_BYTES / 2, &map_a, &full[s], kb * BK, tile_m * BM + BM / 2);
          if (CLUSTER_M > 1)
            multicast_box(b_stage + rank * (B_BYTES / 2), &map_b, &full[s], kb * BK,
                          tile_n * BLOCK_N + static_cast<int>(rank) * (BLOCK_N / 2), 3);
          else
            copy_box(b_stage, &map_b, &full[s], kb * BK, tile_n * BLOCK_N);
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGISTERS));
    const int consumer = warpgroup - 1, rows = consumer * 64; // this consumer's rows of the tile
    const int warp = thread / 32, lane = thread % 32;
    // The stage's slot is free for the cluster's producers once this consumer is done with it.
    const auto release = [&](int stage) {
      if (thread != 0)
        return;
      if (CLUSTER_M > 1) {
        for (unsigned block = 0; block < CLUSTER_M; ++block)
          barrier_arrive_in(&empty[stage], block);
      } else {
        barrier_arrive(&empty[stage]);
      }
    };
    float acc[BLOCK_N / 2];
    int buffer = 0; // EPILOGUE 1: this consumer's buffer to write next
    int s = 0;
    unsigned phase = 0;
    bool first_turn = true; // PINGPONG: consumer 0's first batch waits for no turn
    for (int t = first_pair; t < pairs; t += pair_stride) {
      int tile_m, tile_n;
      place(t, tile_m, tile_n);
      // Register 4j + 2h + e of m64nNk32's accumulators holds row 16 * warp + lane / 4 + 8h,
      // column 8j + 2 (lane % 4) + e.
      const int row0 = tile_m * BM + rows + warp * 16 + lane / 4;
      const int column0 = tile_n * BLOCK_N + 2 * (lane % 4);
      if (SCALING == 2) {
        // Rows past m read the last row's scales: their sums are zeros and never stored.
        const float *scales_lo = scale_a + static_cast<long long>(min(row0, m - 1)) * k_blocks;
        const float *scales_hi = scale_a + static_cast<long long>(min(row0 + 8, m - 1)) * k_blocks;
        // The tile's columns from `first` to the next multiple of 128 take the first block of
        // B's scales, 8-column groups j < `former`; the rest (if any) the next block. A tile
        // past the matrix's last block reads the last block.
        const int first = tile_n * BLOCK_N, n_blocks = (n + BK - 1) / BK;
        const int former = (BK - first % BK) / 8;
        const float *scales_b0 =
            scale_b + static_cast<long long>(min(first / BK, n_blocks - 1)) * k_blocks;
        const float *scales_b1 =
            scale_b + static_cast<long long>(min(first / BK + 1, n_blocks - 1)) * k_blocks;
        // This k-block's scales of the thread's two rows and of the tile's two column blocks,
        // loaded one k-block ahead: global latency under the copies' traffic outlasts a stage.
        struct Scales {
          float lo, hi, b0, b1;
        };
        const auto load_scales = [&](int kb) {
          kb = min(kb, k_blocks - 1);
          const float b0 = __ldg(scales_b0 + kb);
          return Scales{__ldg(scales_lo + kb), __ldg(scales_hi + kb), b0,
                        BK % BLOCK_N == 0 ? b0 : __ldg(scales_b1 + kb)};
        };
        Scales next = load_scales(0);
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i)
          acc[i] = 0.0f;
        // The next stage's four k32 steps into `into`, summed from zero: the tile's columns, or
        // with HALVES those of half `half`.
        unsigned fragments[BK / 32][4]; // A_REGISTERS: this k-block's A, loaded by half 0
        const auto issue = [&](float(&into)[BATCH_N / 2], int half = 0) {
          barrier_wait(&full[s], phase);
          const unsigned char *a_stage = stages + s * STAGE;
          // A_REGISTERS: the fragments load before the turn, whose window they would lengthen.
          if (A_REGISTERS && half == 0)
            load_a_fragments(fragments, a_stage + rows * 128, warp, lane);
          // PINGPONG: the consumers issue their batches in turns, consumer 0's k-block kb,
          // consumer 1's, consumer 0's kb + 1..., so that each one's promotion runs while the
          // other's batch keeps the tensor cores busy; issued at once they finish at once and
          // promote at once, the tensor cores idle meanwhile (BENCHMARKS.md, fp8b helper).
          if (PINGPONG && (consumer == 1 || !first_turn))
            named_barrier_sync(consumer == 0 ? 1 : 2, 256);
          first_turn = false;
          const unsigned char *b_half = a_stage + A_BYTES + half * BATCH_N * BK;
          if constexpr (A_REGISTERS) {
            wgmma_fence(); // after the fragments' writes, which wgmma reads
#pragma unroll
            for (int kk = 0; kk < BK / 32; ++kk)
              WgmmaE4m3Registers<BATCH_N>::run(into, fragments[kk],
                                               kjit::hopper::descriptor(b_half + kk * 32, 16, 1024),
                                               kk > 0);
          } else {
            wgmma_fence();
            stage_product<BATCH_N>(into, a_stage + rows * 128, b_half, false);
          }
          wgmma_commit();
          if (PINGPONG)
            named_barrier_arrive(consumer == 0 ? 2 : 1, 256); // the other consumer's turn
        };
        // acc += a k-block's sums `from` times their scales.
        const auto promote = [&](const float(&from)[BLOCK_N / 2], const Scales &scales) {
          const float lo0 = scales.lo * scales.b0, hi0 = scales.hi * scales.b0;
          const float lo1 = scales.lo * scales.b1, hi1 = scales.hi * scales.b1;
#pragma unroll
          for (int j = 0; j < BLOCK_N / 8; ++j) {
            const bool former_block = BK % BLOCK_N == 0 || j < former;
            const float lo = former_block ? lo0 : lo1, hi = former_block ? hi0 : hi1;
            acc[4 * j] += lo * from[4 * j];
            acc[4 * j + 1] += lo * from[4 * j + 1];
            acc[4 * j + 2] += hi * from[4 * j + 2];
            acc[4 * j + 3] += hi * from[4 * j + 3];
          }
        };
        const auto advance = [&] {
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        };
        float part[BATCH_N / 2];
        if constexpr (HALVES) {
          // acc's registers of half h: column groups 16h to 16h + 15, the scale block first / 128
          // + h (a 256-column tile starts at a multiple of 128).
          const auto promote_half = [&](int half, float lo, float hi) {
#pragma unroll
            for (int i = 0; i < BATCH_N / 2; i += 4) {
              acc[half * (BATCH_N / 2) + i] += lo * part[i];
              acc[half * (BATCH_N / 2) + i + 1] += lo * part[i + 1];
              acc[half * (BATCH_N / 2) + i + 2] += hi * part[i + 2];
              acc[half * (BATCH_N / 2) + i + 3] += hi * part[i + 3];
            }
          };
          // The k-block's scales load as it starts, their latency under half 0's batch: loaded a
          // k-block ahead, they took the registers whose lack spilled at 232 a thread.
          for (int kb = 0; kb < k_blocks; ++kb) {
            const Scales now = load_scales(kb);
            issue(part, 0);
            wgmma_wait<0>();
            promote_half(0, now.lo * now.b0, now.hi * now.b0);
            issue(part, 1);
            wgmma_wait<0>();
            release(s);
            promote_half(1, now.lo * now.b1, now.hi * now.b1);
            advance();
          }
        } else if (!OVERLAP) {
          for (int kb = 0; kb < k_blocks; ++kb) {
            const Scales now = next;
            next = load_scales(kb + 1);
            issue(part);
            wgmma_wait<0>();
            release(s);
            promote(part, now);
            advance();
          }
        } else {
          // OVERLAP: k-block kb's sums are promoted while kb + 1's batch runs, in two sets of
          // registers, `part` for even kb and `other` for odd. The first batch is issued apart
          // and the pairs after it unconditionally, so that ptxas sees each set read only once
          // its batch is retired (else it serialises the wgmma).
          float other[BLOCK_N / 2];
          Scales held_scales = next; // the scales of the batch not yet promoted, and its stage
          next = load_scales(1);
          issue(part);
          int held = s;
          advance();
          const auto step = [&](float(&into)[BLOCK_N / 2], const float(&previous)[BLOCK_N / 2],
                                int kb) {
            const Scales now = next;
            next = load_scales(kb + 1);
            issue(into);
            wgmma_wait<1>();
            release(held);
            promote(previous, held_scales);
            held = s;
            held_scales = now;
            advance();
          };
          int kb = 1;
          for (; kb + 1 < k_blocks; kb += 2) {
            step(other, part, kb);
            step(part, other, kb + 1);
          }
          if (kb < k_blocks) {
            step(other, part, kb);
            wgmma_wait<0>();
            release(held);
            promote(other, held_scales);
          } else {
            wgmma_wait<0>();
            release(held);
            promote(part, held_scales);
          }
        }
      } else {
        // One wgmma batch in flight while the previous stage is released.
        int previous = -1;
        for (int kb = 0; kb < k_blocks; ++kb) {
          barrier_wait(&full[s], phase);
          const unsigned char *a_stage = stages + s * STAGE;
          wgmma_fence();
          stage_product<BLOCK_N>(acc, a_stage + rows * 128, a_stage + A_BYTES, kb > 0);
          wgmma_commit();
          wgmma_wait<1>();
          if (previous >= 0)
            release(previous);
          previous = s;
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
        // The scales load while the last batch runs: at K = 7168 the row-wise epilogue's
        // global loads, issued after it, were a tenth of the tile's time.
        const float tensor = SCALING == 0 ? __ldg(scale_a) * __ldg(scale_b) : 1.0f;
        const float rows_lo = SCALING == 1 ? __ldg(scale_a + min(row0, m - 1)) : 1.0f;
        const float rows_hi = SCALING == 1 ? __ldg(scale_a + min(row0 + 8, m - 1)) : 1.0f;
        float columns[BLOCK_N / 4];
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            columns[2 * j + e] =
                SCALING == 1 ? __ldg(scale_b + min(column0 + 8 * j + e, n - 1)) : 1.0f;
        wgmma_wait<0>();
        if (previous >= 0)
          release(previous);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            acc[4 * j + e] *= tensor * rows_lo * columns[2 * j + e];
            acc[4 * j + 2 + e] *= tensor * rows_hi * columns[2 * j + e];
          }
      }
      if constexpr (EPILOGUE) {
        const int first_row = tile_m * BM + rows;
        // Rows past m (a cluster's tile past the matrix, or this consumer's half of the last
        // tile) are dropped by the copy engine; a consumer with none inside stores nothing.
        if (first_row < m)
          store_boxes<bfloat16, BLOCK_N>(
              &map_d, epilogue + consumer * 2 * BOX, buffer,
              [&](int at, float &v0, float &v1) {
                v0 = acc[at];
                v1 = acc[at + 1];
              },
              first_row, tile_n * BLOCK_N, n, 3 + consumer, thread);
      } else {
        // n is even (the wrapper requires a multiple of 8), so a pair starting inside the matrix
        // ends inside it: one 4-byte store.
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j) {
          const int column = column0 + 8 * j;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
            if (row < m && column < n)
              *reinterpret_cast<typename kjit::Pairs<bfloat16>::type *>(
                  d + static_cast<long long>(row) * n + column) =
                  kjit::Pairs<bfloat16>::pack(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
          }
        }
      }
    }
    if (PINGPONG && SCALING == 2 && consumer == 0 && !first_turn)
      named_barrier_sync(1, 256); // consumer 1's last turn handed back: no arrival left pending
    if (EPILOGUE && thread == 0)  // the stores read shared memory until they are done
      bulk_wait<0>();
  }
  if (CLUSTER_M > 1)
    cluster_sync(); // no block leaves while its peer may still copy into it or arrive on it
}

#endif

// Attention forward on Hopper tensor cores (sm_90a: wgmma, TMA, setmaxnreg), for half and
// bfloat16, head dim 64 or 128, over ragged batches:
//
//   out[i, h, :] = softmax_j(scale * q[i, h, :] . k[j, h / group, :]) @ v[j, h / group, :]
//
// with q and out [total_q, q_heads, HEAD_DIM], k and v [total_k, q_heads / group, HEAD_DIM],
// all contiguous, and sequence b's rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q attending to
// rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k and v (flash_attn_varlen_func's layout; key
// counts are clamped to total_k, stores to total_q, whatever the offsets hold). CAUSAL
// aligns the mask to the bottom right, as FlashAttention does: with q_length rows and k_length
// keys, row i sees keys j <= i + k_length - q_length; a row that sees none gets zeros.
//
// q, k and v arrive as tensor maps (kjit::encode_tensor_map) of 2-D matrices [tokens, heads *
// HEAD_DIM] in boxes of 64 columns (one 128-byte swizzle row), so head h's tile is the boxes at
// column h * HEAD_DIM. A box may run past its sequence into the next one's rows (or past the
// matrix, where the copy engine fills zeros): those rows of q are never stored and those keys are
// masked to -inf, so their probabilities are exact zeros (which still multiply the next
// sequence's v: a NaN or infinity there would leak in, as in FlashAttention's varlen kernels).
//
// An item is 64 * CONSUMERS rows of one head of one sequence (a block takes one, or with
// PERSISTENT several in turn: see the kernel). Warpgroup 0 gives up registers (setmaxnreg) and
// one of its threads copies an item's q once and then its k and v tiles of BLOCK_N keys into a
// ring of STAGES stages; k and v have their own "full" and "empty" mbarriers, so a
// stage's k is replaced as soon as every consumer has its scores. Warpgroups 1..CONSUMERS take 64
// rows each: S = Q K^T (wgmma, both from shared memory), the online softmax in float with exp2
// on the scores held in registers, and O += P V with P from registers (wgmma's A operand in
// registers is mma.sync's fragment, which the scores' accumulator layout already is). Tile j's
// S = Q K_j^T is issued before O += P_{j-1} V_{j-1}, so its softmax runs while the tensor cores
// do the previous tile's P V (FlashAttention-3's intra-warpgroup pipelining). The consumers'
// warpgroups also overlap one another's softmax and matrix products: freely, or with PINGPONG
// (two consumers) in turns, as FlashAttention-3 schedules them, each issuing its products only
// after the other has issued its own, so that one's softmax runs while the other's products do.
//
// flash_attention_mma computes the same on sm_80 and newer with mma.sync: four warps of 16 rows
// (64 rows a block), k and v tiles of BLOCK_N keys staged through shared memory by the whole
// block (16-byte loads, zeros past the sequence), fragments by ldmatrix; each tile is staged,
// then computed, and the blocks resident on a multiprocessor overlap one another's loads.
#if KJIT_HIP
#error "kjit flash_attention: wgmma, TMA and mma.sync are NVIDIA's (sm_90a, sm_80 and newer)"
#else

#include "kjit/hopper.h"
#include "kjit/mma_sync.h"

namespace kjit_flash_attention {

using namespace kjit::hopper;

__device__ inline float minus_infinity() { return -__int_as_float(0x7f800000); }

__device__ inline float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The four lanes lane / 4 * 4 .. + 3 hold one row of an accumulator: their max and sum.
__device__ inline float row_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float row_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The keys of a sequence that starts at row k_start of k and ends before k_end, as cu_seqlens_k
// gives them, clamped to k's total_k rows: whatever cu_seqlens_k holds, a block walks at most
// total_k keys (well-formed offsets are unchanged).
__device__ inline int key_count(int k_start, int k_end, int total_k) {
  if (k_start < 0 || k_start > total_k)
    return 0;
  return max(0, min(k_end, total_k) - k_start);
}

template <typename T> __device__ inline unsigned pack(float a, float b) {
  const typename kjit::Pairs<T>::type pair = kjit::Pairs<T>::pack(a, b);
  return *reinterpret_cast<const unsigned *>(&pair);
}

// A thread's two rows (h = 0, 1) of a consumer's 64: register 4j + 2h + e of an m64nNk16
// accumulator holds row 16 * warp + lane / 4 + 8h, column 8j + 2 (lane % 4) + e.
template <int BLOCK_N> struct OnlineSoftmax {
  float max[2] = {minus_infinity(), minus_infinity()}; // the rows' largest raw score so far
  float sum[2] = {0.f, 0.f}; // this thread's part of the rows' sums of exp2

  // Turns the tile's raw scores s into unnormalised probabilities exp2(s * scale_log2 - max) in
  // place, and gives each row's factor for what was accumulated before (exp2 of the old max less
  // the new). A row with no score yet keeps max -inf and subtracts 0, so that its masked scores
  // give exact zeros rather than NaN.
  __device__ void step(float (&s)[BLOCK_N / 2], float scale_log2, float (&alpha)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = max[h];
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j)
        m = fmaxf(m, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      m = row_max(m);
      const float subtract = m == minus_infinity() ? 0.f : m * scale_log2;
      alpha[h] = exp2_approx(max[h] * scale_log2 - subtract);
      max[h] = m;
      float total = 0.f;
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float &x = s[4 * j + 2 * h + e];
          x = exp2_approx(fmaf(x, scale_log2, -subtract));
          total += x;
        }
      sum[h] = sum[h] * alpha[h] + total;
    }
  }
};

// Scores of keys past the sequence, or (CAUSAL) past a row's diagonal, become -inf: only on the
// tiles that hold such keys for any of the rows from first_row that share this branch (a warp's
// or a warpgroup's). row0 is this thread's first row (the other is row0 + 8).
template <int BLOCK_N, int CAUSAL>
__device__ inline void mask_scores(float (&s)[BLOCK_N / 2], int key0, int k_length, int first_row,
                                   int row0, int offset, int lane) {
  const bool ragged = key0 + BLOCK_N > k_length;
  const bool diagonal = CAUSAL && key0 + BLOCK_N - 1 > first_row + offset;
  if (!ragged && !diagonal)
    return;
#pragma unroll
  for (int jj = 0; jj < BLOCK_N / 8; ++jj)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int key = key0 + 8 * jj + 2 * (lane % 4) + e;
        if (key >= k_length || (CAUSAL && key > row0 + 8 * h + offset))
          s[4 * jj + 2 * h + e] = minus_infinity();
      }
}

// The probabilities in T as the A operand of the products with v (wgmma's register A, mma.sync's
// A): one group of four registers per 16 keys, which the scores' accumulator layout already is.
template <typename T, int BLOCK_N>
__device__ inline void to_probabilities(const float (&s)[BLOCK_N / 2],
                                        unsigned (&p)[BLOCK_N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      p[kk][r] = pack<T>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
}

template <int N> __device__ inline void scale_rows(float (&o)[N], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    o[i] *= alpha[i / 2 % 2];
}

// Where a thread's two rows of an item go: row0's head_dim elements of out (row0 + 8's are a
// row of out further), which of the two are stored (bit h: row0 + 8h; only rows of the sequence,
// and of the matrix whatever cu_seqlens_q holds), and their scales: 1 / the row's sum (0 for a
// row that saw no key; NaN where `poisoned`: a paged sequence whose length or pages the kernel
// refused). Few registers, so that a consumer holds them while it starts the next item.
template <typename T> struct OutputRows {
  T *first;
  unsigned stored;
  float scale[2];
};

template <typename T, int BLOCK_N>
__device__ inline OutputRows<T>
output_rows(T *out, const OnlineSoftmax<BLOCK_N> &softmax, int row0, int q_length, int q_start,
            int total_q, long long row_elements, int column, bool poisoned = false) {
  OutputRows<T> rows;
  rows.stored = 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = row_sum(softmax.sum[h]);
    rows.scale[h] = poisoned ? __int_as_float(0x7fffffff) : total > 0.f ? 1.f / total : 0.f;
    const int row = row0 + 8 * h;
    const long long at = static_cast<long long>(q_start) + row; // in 64 bits: never wraps
    if (row < q_length && at >= 0 && at < total_q)
      rows.stored |= 1u << h;
  }
  rows.first = out + (static_cast<long long>(q_start) + row0) * row_elements + column;
  return rows;
}

// out = O times the rows' scales, stored in pairs from registers.
template <typename T, int HEAD_DIM>
__device__ inline void store_output(const OutputRows<T> &rows, const float (&o)[HEAD_DIM / 2],
                                    long long row_elements) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!(rows.stored >> h & 1u))
      continue;
    T *out_row = rows.first + 8 * h * row_elements;
#pragma unroll
    for (int jj = 0; jj < HEAD_DIM / 8; ++jj)
      *reinterpret_cast<typename kjit::Pairs<T>::type *>(out_row + 8 * jj) = kjit::Pairs<T>::pack(
          o[4 * jj + 2 * h] * rows.scale[h], o[4 * jj + 2 * h + 1] * rows.scale[h]);
  }
}

// What a row that saw no key gets: its scale times 0 (0, or NaN where poisoned).
template <typename T, int HEAD_DIM>
__device__ inline void fill_output(const OutputRows<T> &rows, long long row_elements) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (!(rows.stored >> h & 1u))
      continue;
    const float value = rows.scale[h] * 0.f;
#pragma unroll
    for (int jj = 0; jj < HEAD_DIM / 8; ++jj)
      *reinterpret_cast<typename kjit::Pairs<T>::type *>(
          rows.first + 8 * h * row_elements + 8 * jj) = kjit::Pairs<T>::pack(value, value);
  }
}

// STAGE_O: a consumer's 64 rows of out in shared memory, each row's HEAD_DIM elements contiguous
// (one bulk copy takes a row to out) and, within a group of 8 rows, each row 16 bytes further
// round the banks than the one before (stmatrix's eight rows of 16 bytes fall on distinct banks),
// the groups 8 * ROW_BYTES + 7 * 16 bytes apart. templates/attention.hpp counts the same bytes.
template <int HEAD_DIM> struct StagedRows {
  static constexpr int ROW_BYTES = HEAD_DIM * 2, GROUP_BYTES = 8 * ROW_BYTES + 7 * 16,
                       BYTES = 8 * GROUP_BYTES;
  __device__ static int offset(int row) {
    return row / 8 * GROUP_BYTES + row % 8 * (ROW_BYTES + 16);
  }
};

// store_output through `staged` (this consumer's StagedRows), for all 128 threads of a consumer
// warpgroup, `barrier` its named barrier: the scaled pairs written with stmatrix (8 rows of 16
// bytes each of 4 matrices an instruction, rather than 4 bytes of 8 rows a store), then each
// stored row (bit h of `stored`: lane h of the four that hold it) copied to out with one bulk copy
// that leaves the consumer free to go on (FlashAttention-3's epilogue, rows in place of its
// tensor map, whose box would write past a sequence's last row). The last call's copies have read
// the rows before they are written again.
template <typename T, int HEAD_DIM>
__device__ inline void store_output_staged(const OutputRows<T> &rows,
                                           const float (&o)[HEAD_DIM / 2], long long row_elements,
                                           unsigned char *staged, int barrier, int warp, int lane) {
  using Staged = StagedRows<HEAD_DIM>;
  bulk_wait_read<0>();
  named_barrier_sync(barrier, 128);
  // Lane 8g + i gives row i of matrix g: rows 8 (g % 2) + i of the warp's 16, columns 8 (g / 2)
  // onwards of each 16; the thread's pairs of those matrices are its registers 4j + 2h + e.
  const int g = lane / 8;
  const unsigned at =
      shared_address(staged + Staged::offset(warp * 16 + g % 2 * 8 + lane % 8) + g / 2 * 16);
#pragma unroll
  for (int m = 0; m < HEAD_DIM / 16; ++m) {
    unsigned pairs[4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
      pairs[r] =
          pack<T>(o[8 * m + 2 * r] * rows.scale[r % 2], o[8 * m + 2 * r + 1] * rows.scale[r % 2]);
    asm volatile(
        "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(at + 32 * m),
        "r"(pairs[0]), "r"(pairs[1]), "r"(pairs[2]), "r"(pairs[3])
        : "memory");
  }
  fence_async_shared(); // for the bulk copies' reads
  named_barrier_sync(barrier, 128);
  const int h = lane % 4;
  if (h < 2 && (rows.stored >> h & 1u))
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(
                     rows.first - 2 * h + 8 * h * row_elements),
                 "r"(shared_address(staged + Staged::offset(warp * 16 + lane / 4 + 8 * h))),
                 "n"(Staged::ROW_BYTES)
                 : "memory");
  bulk_commit();
}

// Both at once, for a row of head `head` of q_heads.
template <typename T, int HEAD_DIM, int BLOCK_N>
__device__ inline void store_rows(T *out, const float (&o)[HEAD_DIM / 2],
                                  const OnlineSoftmax<BLOCK_N> &softmax, int row0, int q_length,
                                  int q_start, int total_q, int q_heads, int head, int lane,
                                  bool poisoned = false) {
  const long long row_elements = static_cast<long long>(q_heads) * HEAD_DIM;
  store_output<T, HEAD_DIM>(output_rows<T, BLOCK_N>(out, softmax, row0, q_length, q_start, total_q,
                                                    row_elements, head * HEAD_DIM + 2 * (lane % 4),
                                                    poisoned),
                            o, row_elements);
}

} // namespace kjit_flash_attention

// One block per multiprocessor at a time: the register cap at entry (65536 / its threads) is
// what setmaxnreg redistributes, 40 to the producer and the rest to the consumers.
//
// The work is row_tiles x q_heads x batch items (a tile of rows of one head of one sequence),
// in the order of a grid whose x is the tile, from the last (under CAUSAL the last rows see the
// most keys, and start first), then the head, then the sequence: consecutive items share k and
// v, in L2. PERSISTENT 0 launches a block per item; 1 a block per multiprocessor that takes
// items in rounds of gridDim.x: its producer then loads the next item's q and first tiles while
// the consumers finish the last products and store the outputs of the one before. Under CAUSAL,
// whose items cost 1 to row_tiles key tiles (a sequence's tiles in falling cost), PERSISTENT deals
// each round in the opposite direction to the one before (block b takes the b-th item of even
// rounds and the b-th from the end of odd ones), so that a block's costly items pair with cheap
// ones, and the items running at once stay neighbours that share k and v in L2.
//
// PAGED reads k and v from a paged cache (chunked prefill): map_k and map_v are tensor maps of
// the caches as [num_blocks * page_size, kv_heads * HEAD_DIM] matrices in boxes of page_size
// rows, cu_seqlens_k holds each sequence's key count ([batch], not offsets), and its key j is
// row j % page_size of page block_tables[sequence * max_blocks + j / page_size] (page_size 16 or
// 32, dividing BLOCK_N; total_k = num_blocks * page_size). A key count outside [0, max_blocks *
// page_size] or a page outside [0, num_blocks) is refused on the device: no row of the cache is
// read for it (the copy engine fills the page's box with zeros) and the sequence's outputs are
// NaN. Keys past a sequence's end are zeros in shared memory before their zero probabilities meet
// them, so that nothing the cache holds in the rest of its last page (a NaN) reaches the output.
// PAGED 1 copies each page's boxes with TMA from the producer's one thread (and zeroes the last
// page's rest); PAGED 2 has the producer's 128 threads copy a key's row each with cp.async
// (16-byte chunks, written where the 128-byte swizzle puts them; zeros past the sequence and
// for refused pages), reading k_cache and v_cache (the caches' pointers) rather than the maps:
// FlashAttention-3 and FlashInfer load small pages so, a box of 16 or 32 rows being slow to
// copy. Unpaged, block_tables, k_cache and v_cache are null and max_blocks and page_size 0.
//
// STAGE_O 1 stores an item's output through shared memory (store_output_staged: stmatrix, then a
// bulk copy a row) rather than from registers: a consumer spends a few instructions on it and
// goes on to its next products while the copy engine writes out.
template <typename T, int HEAD_DIM, int CAUSAL, int CONSUMERS, int BLOCK_N, int STAGES,
          int PINGPONG, int PERSISTENT, int PAGED, int Q_BUFFERS, int STAGE_O>
__global__ void __launch_bounds__(128 * (CONSUMERS + 1), 1)
    flash_attention(T *KJIT_RESTRICT out, const __grid_constant__ kjit::TensorMap map_q,
                    const __grid_constant__ kjit::TensorMap map_k,
                    const __grid_constant__ kjit::TensorMap map_v,
                    const int *KJIT_RESTRICT cu_seqlens_q, const int *KJIT_RESTRICT cu_seqlens_k,
                    int total_q, int total_k, int q_heads, int group, int row_tiles, int batch,
                    float scale_log2, const int *KJIT_RESTRICT block_tables, int max_blocks,
                    int page_size, const T *KJIT_RESTRICT k_cache, const T *KJIT_RESTRICT v_cache) {
  using namespace kjit_flash_attention;
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head dim 64 or 128");
  static_assert(BLOCK_N == 64 || BLOCK_N == 128, "key tiles of 64 or 128");
  static_assert(CONSUMERS == 2 || CONSUMERS == 3, "two or three consumer warpgroups");
  static_assert(!PINGPONG || CONSUMERS == 2, "turns between two consumers");
  constexpr int BLOCK_M = 64 * CONSUMERS, BOXES = HEAD_DIM / 64;
  constexpr int Q_BOX = BLOCK_M * 128, Q_BYTES = BOXES * Q_BOX;
  constexpr int KV_BOX = BLOCK_N * 128, KV_BYTES = BOXES * KV_BOX;
  constexpr int CONSUMER_REGISTERS = CONSUMERS == 2 ? 232 : 152;

  static_assert(PAGED >= 0 && PAGED <= 2, "PAGED 0, 1 or 2");
  static_assert(Q_BUFFERS == 1 || Q_BUFFERS == 2, "one or two q tiles");
  static_assert(STAGE_O == 0 || STAGE_O == 1, "out from registers or through shared memory");
  // With two q tiles the next item's q is in before this item's last products, so a consumer
  // issues those products after the next item's first scores (see `pending` below). Not PAGED:
  // there the state it keeps across items (and the pages' checks) spill past the consumers'
  // registers and serialise wgmma.
  constexpr bool OVERLAP = Q_BUFFERS == 2 && !PAGED;
  constexpr bool ROW_COPIES = PAGED == 2; // the producer's 128 threads copy k and v

  // Item t's rows, head, sequence and extent; `tiles` k and v tiles (0: its rows see no key);
  // `refused`: PAGED, a key count the kernel refuses.
  struct Item {
    int first, head, sequence, q_start, q_length, k_start, k_length, offset, tiles;
    bool refused;
  };
  // t < items, at most INT_MAX (the launch refuses more): 32-bit divisions, which the consumers
  // do for every item on their way to its first products.
  const auto item = [&](long long t) {
    Item it;
    const int n = static_cast<int>(t), rest = n / row_tiles;
    it.first = (row_tiles - 1 - (n - rest * row_tiles)) * BLOCK_M;
    it.head = rest % q_heads;
    it.sequence = rest / q_heads;
    it.q_start = cu_seqlens_q[it.sequence];
    it.q_length = cu_seqlens_q[it.sequence + 1] - it.q_start;
    it.refused = false;
    if (PAGED) {
      const int keys = cu_seqlens_k[it.sequence];
      it.refused = keys < 0 || keys > max_blocks * page_size;
      it.k_start = 0;
      it.k_length = it.refused ? 0 : keys;
    } else {
      it.k_start = cu_seqlens_k[it.sequence];
      it.k_length = key_count(it.k_start, cu_seqlens_k[it.sequence + 1], total_k);
    }
    it.offset = it.k_length - it.q_length; // CAUSAL: row i sees keys j <= i + offset
    const int k_end = CAUSAL ? min(it.k_length, it.first + BLOCK_M + it.offset) : it.k_length;
    it.tiles = k_end > 0 ? (k_end + BLOCK_N - 1) / BLOCK_N : 0;
    return it;
  };
  const long long items = static_cast<long long>(row_tiles) * q_heads * batch;
  const long long blocks = PERSISTENT ? gridDim.x : items;
  // The item this block takes in `round` (items or more: none).
  const auto nth = [&](long long round) {
    const bool backwards = CAUSAL && PERSISTENT && round % 2 == 1;
    return round * blocks + (backwards ? blocks - 1 - blockIdx.x : blockIdx.x);
  };

  // Dynamic shared memory, 1024-byte aligned (the swizzle's period; the launch asks for the
  // slack): Q_BUFFERS q tiles, STAGES k tiles, STAGES v tiles, STAGE_O: each consumer's rows of
  // out (StagedRows), then the barriers.
  extern __shared__ unsigned char shared_raw[];
  unsigned char *q_tile = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<unsigned long long>(shared_raw) + 1023) & ~1023ull);
  unsigned char *k_stages = q_tile + Q_BUFFERS * Q_BYTES;
  unsigned char *v_stages = k_stages + STAGES * KV_BYTES;
  unsigned char *o_staged = v_stages + STAGES * KV_BYTES;
  constexpr int O_STAGED_BYTES = STAGE_O ? CONSUMERS * StagedRows<HEAD_DIM>::BYTES : 0;
  unsigned long long *q_full = reinterpret_cast<unsigned long long *>(o_staged + O_STAGED_BYTES);
  unsigned long long *q_empty = q_full + Q_BUFFERS;
  unsigned long long *k_full = q_empty + Q_BUFFERS, *k_empty = k_full + STAGES;
  unsigned long long *v_full = k_empty + STAGES, *v_empty = v_full + STAGES;
  // PAGED: the last item whose k tile in stage s named a page outside the cache, written by the
  // producer before it arrives on k_full[s] (whose wait makes it visible) and read before
  // k_empty[s] (-1 until one does).
  __shared__ int bad_page[PAGED ? STAGES : 1];

  const int warpgroup = threadIdx.x / 128, thread = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int b = 0; b < Q_BUFFERS; ++b) {
      barrier_init(&q_full[b], 1);
      barrier_init(&q_empty[b], CONSUMERS);
    }
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&k_full[s], ROW_COPIES ? 128 : 1);
      barrier_init(&v_full[s], ROW_COPIES ? 128 : 1);
      if (PAGED)
        bad_page[s] = -1;
      barrier_init(&k_empty[s], CONSUMERS);
      barrier_init(&v_empty[s], CONSUMERS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  // Both sides walk the same items and tiles, so the ring's stage and phase, and q's buffer and
  // phase, advance alike. A fresh barrier's previous phase counts as done: the producer's first
  // waits on the "empty" barriers pass. With Q_BUFFERS 2 (PERSISTENT) the producer copies the
  // next item's q while the consumers still read this one's, so that the next item's first k and
  // v tiles, which it copies after q, wait only for the ring.
  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (ROW_COPIES || thread == 0) {
      int s = 0, qb = 0;
      unsigned phase = 0, q_phase = 0;
      for (long long round = 0; round * blocks < items; ++round) {
        const long long t = nth(round);
        if (t >= items)
          continue;
        const Item it = item(t);
        if (it.first >= it.q_length || it.tiles == 0)
          continue;
        const int kv_column = it.head / group * HEAD_DIM;
        // Tile j's rows of the k and v matrices: one box from row k_start + j * BLOCK_N, or
        // (PAGED) BLOCK_N / page_size pages' boxes, row total_k (past the cache: zeros) for
        // keys past the sequence and refused pages.
        constexpr int MOST_PAGES = BLOCK_N / 16;
        int page_rows[MOST_PAGES];
        const auto find_pages = [&](int j) {
          int bad = 0;
#pragma unroll
          for (int p = 0; p < (PAGED ? MOST_PAGES : 0); ++p) {
            const int key = j * BLOCK_N + p * page_size;
            page_rows[p] = total_k;
            if (p * page_size < BLOCK_N && key < it.k_length) {
              const int page =
                  block_tables[static_cast<long long>(it.sequence) * max_blocks + key / page_size];
              if (page >= 0 && page < total_k / page_size)
                page_rows[p] = page * page_size;
              else
                bad = 1;
            }
          }
          return bad;
        };
        const auto copy_tile = [&](unsigned char *tile, const kjit::TensorMap *map,
                                   unsigned long long *bar, int j) {
#pragma unroll
          for (int b = 0; b < BOXES; ++b) {
            if (!PAGED) {
              copy_box(tile + b * KV_BOX, map, bar, kv_column + b * 64, it.k_start + j * BLOCK_N);
              continue;
            }
            // Pages at 2048- or 4096-byte steps: the 128-byte swizzle (period 1024) lays their
            // rows out as one box of BLOCK_N rows would.
#pragma unroll
            for (int p = 0; p < MOST_PAGES; ++p)
              if (p * page_size < BLOCK_N)
                copy_box(tile + b * KV_BOX + p * page_size * 128, map, bar, kv_column + b * 64,
                         page_rows[p]);
          }
        };
        // ROW_COPIES: this thread's key of tile j (row thread % BLOCK_N) and its chunks (every
        // 128 / BLOCK_N-th from thread / BLOCK_N), from its page's row or, past the sequence
        // or from a refused page, zeros (a copy of no bytes). Their completion and this
        // thread's writes (bad_page) reach the consumers through `full`'s two arrivals.
        constexpr int CHUNKS = HEAD_DIM / 8;
        const long long row_elements = static_cast<long long>(q_heads / group) * HEAD_DIM;
        const auto copy_rows = [&](unsigned char *tile, const T *cache, int row, int bytes,
                                   unsigned long long *full) {
          const int r = thread % BLOCK_N;
          const T *from = cache + row * row_elements + kv_column;
          const unsigned to = shared_address(tile + r * 128);
#pragma unroll 1 // within the producer's 40 registers
          for (int c = thread / BLOCK_N; c < CHUNKS; c += 128 / BLOCK_N)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                             to + c / 8 * KV_BOX + (c % 8 ^ r % 8) * 16),
                         "l"(from + c * 8), "r"(bytes)
                         : "memory");
          asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" ::"r"(shared_address(full))
                       : "memory");
          barrier_arrive(full);
        };
        if (thread == 0) {
          // The consumers' last scores of the item before (Q_BUFFERS 2: two items before).
          barrier_wait(&q_empty[qb], q_phase ^ 1);
          barrier_expect_bytes(&q_full[qb], Q_BYTES);
#pragma unroll
          for (int b = 0; b < BOXES; ++b)
            copy_box(q_tile + qb * Q_BYTES + b * Q_BOX, &map_q, &q_full[qb],
                     it.head * HEAD_DIM + b * 64, it.q_start + it.first);
          if (++qb == Q_BUFFERS) {
            qb = 0;
            q_phase ^= 1;
          }
        }
        for (int j = 0; j < it.tiles; ++j) {
          if (ROW_COPIES) {
            const int key = j * BLOCK_N + thread % BLOCK_N;
            int row = 0, bytes = 0; // the cache's first row, none of it copied
            if (key < it.k_length) {
              const int page =
                  block_tables[static_cast<long long>(it.sequence) * max_blocks + key / page_size];
              if (page >= 0 && page < total_k / page_size) {
                row = page * page_size + key % page_size;
                bytes = 16;
              }
            }
            barrier_wait(&k_empty[s], phase ^ 1);
            if (key < it.k_length && bytes == 0)
              bad_page[s] = static_cast<int>(t);
            copy_rows(k_stages + s * KV_BYTES, k_cache, row, bytes, &k_full[s]);
            barrier_wait(&v_empty[s], phase ^ 1);
            copy_rows(v_stages + s * KV_BYTES, v_cache, row, bytes, &v_full[s]);
          } else {
            const int bad = PAGED ? find_pages(j) : 0; // the table's reads before the wait
            barrier_wait(&k_empty[s], phase ^ 1);
            if (bad)
              bad_page[s] = static_cast<int>(t);
            barrier_expect_bytes(&k_full[s], KV_BYTES);
            copy_tile(k_stages + s * KV_BYTES, &map_k, &k_full[s], j);
            barrier_wait(&v_empty[s], phase ^ 1);
            barrier_expect_bytes(&v_full[s], KV_BYTES);
            copy_tile(v_stages + s * KV_BYTES, &map_v, &v_full[s], j);
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGISTERS));
    const int consumer = warpgroup - 1, warp = thread / 32, lane = thread % 32;
    const unsigned char *q_rows = q_tile; // this consumer's 64 rows of the item's q tile
    float o[HEAD_DIM / 2];
    float s[BLOCK_N / 2];
    unsigned p[BLOCK_N / 16][4]; // P in T, as wgmma's register A: one group of 4 per 16 keys

    const auto release = [&](unsigned long long *bar) {
      if (thread == 0)
        barrier_arrive(bar);
    };
    // S = Q K^T for the k tile in `stage`: HEAD_DIM / 16 steps along the head dim.
    const auto issue_scores = [&](int stage) {
      const unsigned char *k_tile = k_stages + stage * KV_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
        WgmmaShared<T, BLOCK_N, 0>::run(
            s, descriptor(q_rows + kk / 4 * Q_BOX + kk % 4 * 32, 16, 1024),
            descriptor(k_tile + kk / 4 * KV_BOX + kk % 4 * 32, 16, 1024), kk > 0);
      wgmma_commit();
    };
    // O += P V for the v tile in `stage`: BLOCK_N / 16 steps along the keys, V read MN-major
    // (its 64-column blocks KV_BOX apart).
    const auto issue_output = [&](int stage) {
      const unsigned char *v_tile = v_stages + stage * KV_BYTES;
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk)
        WgmmaRegisters<T, HEAD_DIM, 1>::run(o, p[kk],
                                            descriptor(v_tile + kk * 16 * 128, KV_BOX, 1024), 1);
      wgmma_commit();
    };
    // PINGPONG: consumer c waits at named barrier 1 + c for the other's arrival before issuing
    // products, and arrives at the other's after. In each item consumer 1 arrives once first, so
    // consumer 0 starts, and not after its last products, so every arrival is waited for.
    const auto my_turn = [&] {
      if (PINGPONG)
        asm volatile("bar.sync %0, 256;" ::"r"(1 + consumer) : "memory");
    };
    const auto your_turn = [&] {
      if (PINGPONG)
        asm volatile("bar.arrive %0, 256;" ::"r"(2 - consumer) : "memory");
    };

    // PAGED: the rows of an item's last v tile past its `valid` keys hold what the last page's
    // other slots hold, which may be anything (a NaN there would reach out through its zero
    // probability): both consumers write zeros over them, made visible to wgmma (the async proxy)
    // before either issues its products. Unpaged, those rows are the matrix's (as documented).
    const auto clear_rows_past = [&](int stage, int valid) {
      if (PAGED != 1 || valid >= BLOCK_N)
        return;
      unsigned char *v_tile = v_stages + stage * KV_BYTES;
      const int chunks = (BLOCK_N - valid) * 8; // 16-byte chunks of one box's rows
      for (int i = consumer * 128 + thread; i < chunks * BOXES; i += 128 * CONSUMERS)
        *reinterpret_cast<uint4 *>(v_tile + i / chunks * KV_BOX + (valid + i % chunks / 8) * 128 +
                                   i % 8 * 16) = make_uint4(0, 0, 0, 0);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("bar.sync 3, %0;" ::"n"(128 * CONSUMERS) : "memory");
    };

    // ROW_COPIES: the tiles waited for came through the generic proxy, from which wgmma (the
    // async proxy) must be fenced.
    const auto fence_copies = [] {
      if (ROW_COPIES)
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    };

    const auto first_row = [&](const Item &it) { // this thread's first row (the other: + 8)
      return it.first + consumer * 64 + warp * 16 + lane / 4;
    };
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i)
      o[i] = 0.f;
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        p[kk][r] = 0u;

    // The item whose last products, O += P V for its last v tile (in `last_stage`, P in p), are
    // not issued yet: OVERLAP issues them in the next item's first turn, after that item's first
    // scores, so that the tensor cores do them while the new scores' softmax runs. The turns of
    // PINGPONG run on across such a chain of items: consumer 1 arrives once as a chain starts and
    // consumer 0 not after the chain's last products (`flush`), so every arrival is waited for.
    // Its tile is the one before the ring's `stage` (held, with its rows' places, in few
    // registers: the first turn of the next item needs all but a few of them). OVERLAP issues
    // those products in every item's first turn, pending or not (then on a P of zeros or the
    // last item's, stored nowhere and cleared), so that which wgmma groups are in flight never
    // depends on a branch: ptxas would serialise them.
    bool pending = false;
    OutputRows<T> last_rows = {out, 0u, {0.f, 0.f}};
    int last_valid = 0; // PAGED 1: its last tile's keys
    int stage = 0, qb = 0;
    unsigned phase = 0, q_phase = 0;
    const long long row_elements = static_cast<long long>(q_heads) * HEAD_DIM;
    const auto last_stage = [&] { return stage == 0 ? STAGES - 1 : stage - 1; };
    // The pending item's v tile is in (PAGED 1: zeros over its rows past the keys).
    const auto wait_last_values = [&] {
      barrier_wait(&v_full[last_stage()], stage == 0 ? phase ^ 1 : phase);
    };
    const auto clear_last_values = [&] { clear_rows_past(last_stage(), last_valid); };
    // Its products done: frees the stage, stores its rows (none where nothing was pending) and
    // clears O for the next item.
    const auto store_last = [&] {
      if (pending)
        release(&v_empty[last_stage()]);
      if (STAGE_O && pending) // the same in every thread of the consumer, as its barrier needs
        store_output_staged<T, HEAD_DIM>(last_rows, o, row_elements,
                                         o_staged + consumer * StagedRows<HEAD_DIM>::BYTES,
                                         4 + consumer, warp, lane);
      else
        store_output<T, HEAD_DIM>(last_rows, o, row_elements);
#pragma unroll
      for (int i = 0; i < HEAD_DIM / 2; ++i)
        o[i] = 0.f;
      pending = false;
      last_rows.stored = 0;
    };
    // The pending item's last products alone, the chain's last turn (OVERLAP: issued whether or
    // not one is pending).
    const auto flush = [&] {
      if (!OVERLAP && !pending)
        return;
      if (pending) {
        wait_last_values();
        fence_copies();
        clear_last_values();
        my_turn();
      }
      issue_output(last_stage());
      if (pending && consumer == 0)
        your_turn();
      wgmma_wait<0>();
      store_last();
    };

    for (long long round = 0; round * blocks < items; ++round) {
      const long long t = nth(round);
      if (t >= items)
        continue;
      const Item it = item(t);
      if (it.first >= it.q_length)
        continue;
      bool poisoned = it.refused;
      if (it.tiles == 0) { // its rows see no key: zeros (NaN where poisoned); O is not touched
        fill_output<T, HEAD_DIM>(
            output_rows<T, BLOCK_N>(out, OnlineSoftmax<BLOCK_N>(), first_row(it), it.q_length,
                                    it.q_start, total_q, row_elements,
                                    it.head * HEAD_DIM + 2 * (lane % 4), poisoned),
            row_elements);
        continue;
      }
      // PAGED: stage `at`'s k tile named a refused page (read before k_empty[at] is released).
      const auto check_pages = [&](int at) {
        if (PAGED)
          poisoned |= bad_page[at] == static_cast<int>(t);
      };
      const int row0 = first_row(it); // and row0 + 8
      const auto mask = [&](int j) {
        mask_scores<BLOCK_N, CAUSAL>(s, j * BLOCK_N, it.k_length, it.first + consumer * 64, row0,
                                     it.offset, lane);
      };
      OnlineSoftmax<BLOCK_N> softmax;
      float alpha[2];
      unsigned long long *const q_release = &q_empty[qb];
      barrier_wait(&q_full[qb], q_phase);
      q_rows = q_tile + qb * Q_BYTES + consumer * 64 * 128;
      if (++qb == Q_BUFFERS) {
        qb = 0;
        q_phase ^= 1;
      }
      if (!pending && consumer == 1)
        your_turn(); // a chain starts
      barrier_wait(&k_full[stage], phase);
      check_pages(stage);
      if (pending)
        wait_last_values();
      fence_copies();
      if (pending)
        clear_last_values();
      my_turn();
      issue_scores(stage);
      if (OVERLAP)
        issue_output(last_stage());
      your_turn();
      if (OVERLAP)
        wgmma_wait<1>(); // the scores are in; the last item's products may still run
      else
        wgmma_wait<0>();
      release(&k_empty[stage]);
      if (it.tiles == 1)
        release(q_release); // q's last read
      mask(0);
      softmax.step(s, scale_log2, alpha);
      if (OVERLAP) {
        wgmma_wait<0>();
        store_last();
      }
      to_probabilities<T, BLOCK_N>(s, p);
      for (int j = 1; j < it.tiles; ++j) {
        const int previous = stage;
        const unsigned previous_phase = phase;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
        barrier_wait(&k_full[stage], phase);
        check_pages(stage);
        barrier_wait(&v_full[previous], previous_phase);
        fence_copies();
        my_turn();
        issue_scores(stage);
        issue_output(previous);
        your_turn();
        wgmma_wait<1>(); // the scores are in; P_{j-1} V_{j-1} may still run
        release(&k_empty[stage]);
        if (j == it.tiles - 1)
          release(q_release);
        mask(j);
        softmax.step(s, scale_log2, alpha);
        wgmma_wait<0>();
        release(&v_empty[previous]);
        scale_rows(o, alpha);
        to_probabilities<T, BLOCK_N>(s, p);
      }
      pending = true;
      last_rows =
          output_rows<T, BLOCK_N>(out, softmax, row0, it.q_length, it.q_start, total_q,
                                  row_elements, it.head * HEAD_DIM + 2 * (lane % 4), poisoned);
      last_valid = it.k_length - (it.tiles - 1) * BLOCK_N;
      if (++stage == STAGES) {
        stage = 0;
        phase ^= 1;
      }
      if (!OVERLAP)
        flush();
    }
    flush();
    if (STAGE_O) // the bulk copies done before the block's shared memory goes
      bulk_wait<0>();
  }
}

template <typename T, int HEAD_DIM, int CAUSAL, int BLOCK_N>
__global__ void __launch_bounds__(128)
    flash_attention_mma(T *KJIT_RESTRICT out, const T *KJIT_RESTRICT q, const T *KJIT_RESTRICT k,
                        const T *KJIT_RESTRICT v, const int *KJIT_RESTRICT cu_seqlens_q,
                        const int *KJIT_RESTRICT cu_seqlens_k, int total_q, int total_k,
                        int q_heads, int group, float scale_log2) {
  using namespace kjit_flash_attention;
  using kjit::mma_sync::ldmatrix_x4;
  using kjit::mma_sync::Mma;
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head dim 64 or 128");
  static_assert(BLOCK_N == 32 || BLOCK_N == 64, "key tiles of 32 or 64");
  constexpr int BLOCK_M = 64, LD = HEAD_DIM + 8; // rows padded: a ldmatrix's 8 rows, 8 banks
  // q's tile first (until its fragments are in registers), then k's.
  __shared__ __align__(16) T k_tile[(BLOCK_M > BLOCK_N ? BLOCK_M : BLOCK_N) * LD];
  __shared__ __align__(16) T v_tile[BLOCK_N * LD];

  const int head = blockIdx.y, sequence = blockIdx.z;
  const int first = (gridDim.x - 1 - blockIdx.x) * BLOCK_M;
  const int q_start = cu_seqlens_q[sequence], q_length = cu_seqlens_q[sequence + 1] - q_start;
  const int k_start = cu_seqlens_k[sequence];
  const int k_length = key_count(k_start, cu_seqlens_k[sequence + 1], total_k);
  if (first >= q_length)
    return;
  const int offset = k_length - q_length;
  const int k_end = CAUSAL ? min(k_length, first + BLOCK_M + offset) : k_length;
  const int tiles = k_end > 0 ? (k_end + BLOCK_N - 1) / BLOCK_N : 0;
  const int kv_head = head / group, kv_heads = q_heads / group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, matrix = lane / 8;
  const int row0 = first + warp * 16 + lane / 4;

  // ROWS rows of `from` (rows `stride` elements apart) from row `start`, head_dim elements at
  // `column`, into `tile`: rows past `length` of the sequence or outside [0, total) are zeros
  // (`start` in 64 bits, so that no cu_seqlens makes it wrap into the array).
  const auto stage = [&](T *tile, const T *from, int rows, long long start, int length, int total,
                         int stride, int column) {
    constexpr int CHUNKS = HEAD_DIM / 8; // 16 bytes each
    for (int i = threadIdx.x; i < rows * CHUNKS; i += 128) {
      const int r = i / CHUNKS, c = i % CHUNKS;
      uint4 chunk = make_uint4(0, 0, 0, 0);
      if (r < length && start + r >= 0 && start + r < total)
        chunk = *reinterpret_cast<const uint4 *>(
            from + (start + r) * static_cast<long long>(stride) + column + c * 8);
      *reinterpret_cast<uint4 *>(tile + r * LD + c * 8) = chunk;
    }
  };

  float o[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i)
    o[i] = 0.f;
  OnlineSoftmax<BLOCK_N> softmax;
  if (tiles > 0) {
    // This warp's 16 rows of q as A fragments: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7),
    // (rows 0-7, k 8-15), (rows 8-15, k 8-15), lane 8i + r pointing at row r of matrix i.
    stage(k_tile, q, BLOCK_M, static_cast<long long>(q_start) + first, q_length - first, total_q,
          q_heads * HEAD_DIM, head * HEAD_DIM);
    __syncthreads();
    unsigned q_fragments[HEAD_DIM / 16][4];
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      ldmatrix_x4<false>(q_fragments[kk], k_tile + (warp * 16 + matrix % 2 * 8 + lane % 8) * LD +
                                              kk * 16 + matrix / 2 * 8);
    for (int j = 0; j < tiles; ++j) {
      const int key0 = j * BLOCK_N;
      __syncthreads(); // every warp is done with the previous tiles (and q's)
      stage(k_tile, k, BLOCK_N, static_cast<long long>(k_start) + key0, k_length - key0, total_k,
            kv_heads * HEAD_DIM, kv_head * HEAD_DIM);
      stage(v_tile, v, BLOCK_N, static_cast<long long>(k_start) + key0, k_length - key0, total_k,
            kv_heads * HEAD_DIM, kv_head * HEAD_DIM);
      __syncthreads();
      // S = Q K^T: K's rows are B's columns (k-major), two n-tiles of 8 keys per ldmatrix:
      // matrices (keys 0-7, k 0-7), (keys 0-7, k 8-15), then keys 8-15.
      float s[BLOCK_N / 2];
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i)
        s[i] = 0.f;
#pragma unroll
      for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
#pragma unroll
        for (int np = 0; np < BLOCK_N / 16; ++np) {
          unsigned b[4];
          ldmatrix_x4<false>(b, k_tile + (np * 16 + matrix / 2 * 8 + lane % 8) * LD + kk * 16 +
                                    matrix % 2 * 8);
          Mma<T>::run(&s[8 * np], q_fragments[kk], b[0], b[1]);
          Mma<T>::run(&s[8 * np + 4], q_fragments[kk], b[2], b[3]);
        }
      mask_scores<BLOCK_N, CAUSAL>(s, key0, k_length, first + warp * 16, row0, offset, lane);
      float alpha[2];
      softmax.step(s, scale_log2, alpha);
      scale_rows(o, alpha);
      unsigned p[BLOCK_N / 16][4];
      to_probabilities<T, BLOCK_N>(s, p);
      // O += P V: V [keys][head_dim] read transposed, two n-tiles of 8 columns per ldmatrix:
      // matrices (keys 0-7, columns 0-7), (keys 8-15, columns 0-7), then columns 8-15.
#pragma unroll
      for (int kk = 0; kk < BLOCK_N / 16; ++kk)
#pragma unroll
        for (int dp = 0; dp < HEAD_DIM / 16; ++dp) {
          unsigned b[4];
          ldmatrix_x4<true>(b, v_tile + (kk * 16 + matrix % 2 * 8 + lane % 8) * LD + dp * 16 +
                                   matrix / 2 * 8);
          Mma<T>::run(&o[8 * dp], p[kk], b[0], b[1]);
          Mma<T>::run(&o[8 * dp + 4], p[kk], b[2], b[3]);
        }
    }
  }
  store_rows<T, HEAD_DIM, BLOCK_N>(out, o, softmax, row0, q_length, q_start, total_q, q_heads, head,
                                   lane);
}

#endif

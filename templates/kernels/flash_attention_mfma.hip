// Attention forward on AMD matrix cores (MFMA: gfx942, gfx950), for half and bfloat16, head dim
// 64 or 128, over ragged batches, with flash_attention.hip's layout and semantics:
//
//   out[i, h, :] = softmax_j(scale * q[i, h, :] . k[j, h / group, :]) @ v[j, h / group, :]
//
// q and out [total_q, q_heads, HEAD_DIM], k and v [total_k, q_heads / group, HEAD_DIM], all
// contiguous; sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q attending to rows
// cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k and v (key counts clamped to total_k, stores to
// total_q, whatever the offsets hold). CAUSAL aligns the mask to the bottom right: with q_length
// rows and k_length keys, row i sees keys j <= i + k_length - q_length; a row that sees none gets
// zeros. Scores and the online softmax are float, with exp2.
//
// A block takes 32 * WAVES rows of one head of one sequence, a wave 32 of them. Per tile of
// BLOCK_N keys the block stages k as [key][d] and v transposed, as [d][key], in LDS (rows padded
// by 8 elements; zeros past the sequence), reading the next tile from global memory (16 bytes at a
// time, kjit/gemm_staging.h) while this one is computed. Each wave computes the transposed
// products, so that the softmax needs no exchange of registers between lanes:
// - S^T = K Q^T, 32 keys by the wave's 32 queries per MFMA tile (kjit/mfma.h's 32 x 32 forms):
//   A is k from LDS, B is q, held in registers for the whole walk. In S^T's result layout lane l
//   holds query l % 32 and half of the tile's keys; the other half is in lane l ^ 32, one
//   shuffle away for the row's max and sum.
// - O^T += V^T P^T, HEAD_DIM / 32 tiles of 32 dims by the 32 queries: B is P, the
//   probabilities rounded to T, taken as they lie in S^T's registers (register r of lane l is B's
//   slot r % K_LANE for the keys of MFMA step r / K_LANE), and A is v^T from LDS, read at the keys
//   those slots hold. To make them K_LANE consecutive keys (one 8- or 16-byte LDS read), S^T's
//   row of each key is permuted: row p of a tile holds key tile_key(4 * (p / 8) + p % 4, p / 4 %
//   2), the key its result register carries to that slot (the identity on gfx942).
// The results are O^T's: lane l holds 4 consecutive dims of query l % 32 per group of 4
// registers, divided by the row's sum and stored 8 bytes at a time.
//
// PAGED 1 reads k and v from a paged cache (chunked prefill; flash_attention.hip's PAGED
// semantics): k and v are the caches [num_blocks, page_size, q_heads / group, HEAD_DIM], total_k
// is num_blocks * page_size, cu_seqlens_k holds each sequence's key count ([batch], not offsets),
// and its key j is row j % page_size of page block_tables[sequence * max_blocks + j / page_size]
// (page_size 16 or 32). A tile's rows are gathered page by page into the same registers the
// contiguous walk stages, zeros past the sequence, so that whatever the rest of its last page
// holds (a NaN) meets no probability. Before walking, a block checks the sequence's key count
// (within [0, max_blocks * page_size]) and every page it names (within [0, num_blocks)): a refused
// sequence reads nothing from the cache and its outputs are NaN. Unpaged, block_tables is null
// and max_blocks and page_size 0.
#if !KJIT_HIP || !(defined(__gfx942__) || defined(__gfx950__))
#error "kjit flash_attention_mfma: MFMA with these shapes is gfx942's and gfx950's"
#else
#include "kjit/gemm_staging.h"
#include "kjit/mfma.h"

namespace kjit_flash_attention_mfma {

using kjit_mfma::K_LANE;
using kjit_mfma::K_PER_MFMA;

__device__ inline float minus_infinity() { return -__int_as_float(0x7f800000); }

// The key, within a 32-key tile, that result register r of a lane in half h (lane / 32) of an
// S^T tile holds: slot h * K_LANE + r % K_LANE of MFMA step r / K_LANE along the keys.
__device__ inline int tile_key(int r, int h) {
  return K_PER_MFMA * (r / K_LANE) + h * K_LANE + r % K_LANE;
}

// The keys of a sequence that starts at row k_start of k and ends before k_end, as cu_seqlens_k
// gives them, clamped to k's total_k rows (well-formed offsets are unchanged).
__device__ inline int key_count(int k_start, int k_end, int total_k) {
  if (k_start < 0 || k_start > total_k)
    return 0;
  const int end = min(k_end, total_k);
  return end > k_start ? end - k_start : 0;
}

// PAGED: whether any of the first `count` entries of `pages` lies outside [0, num_blocks), the
// block's THREADS threads reading them and all getting the answer (a barrier: call it from every
// thread of the block).
template <int THREADS>
__device__ inline bool any_page_outside(const int *pages, int count, int num_blocks) {
  __shared__ int outside;
  if (threadIdx.x == 0)
    outside = 0;
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += THREADS) {
    const int page = pages[i];
    if (page < 0 || page >= num_blocks)
      outside = 1;
  }
  __syncthreads();
  return outside != 0;
}

// PAGED: one thread's share (kjit_gemm::TileShare's chunks) of the tile of keys from key0 of k
// and v, from the caches as [num_blocks * page_size, row_elements] matrices of which the tile
// takes its columns from `column`: key j is row (pages[j >> page_shift] << page_shift) + j %
// page_size, zeros from k_length on. The pages were checked (any_page_outside).
template <typename Share, typename T>
__device__ inline void read_pages(Share &k_share, Share &v_share, const T *k_cache,
                                  const T *v_cache, const int *pages, int page_shift, int key0,
                                  int k_length, long long row_elements, int column, bool vectors) {
#pragma unroll
  for (int item = 0; item < Share::ITEMS; ++item) {
    int r, c;
    if (!Share::place(item, r, c))
      continue;
    const int key = key0 + r;
    if (key >= k_length) {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        k_share.chunks[item].at[e] = v_share.chunks[item].at[e] = kjit::from_float<T>(0.f);
      continue;
    }
    const long long row = (static_cast<long long>(pages[key >> page_shift]) << page_shift) +
                          (key & ((1 << page_shift) - 1));
    const long long at = row * row_elements + column + c;
    if (vectors) {
      k_share.chunks[item] = kjit::load_vec<8>(k_cache + at);
      v_share.chunks[item] = kjit::load_vec<8>(v_cache + at);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        k_share.chunks[item].at[e] = k_cache[at + e];
        v_share.chunks[item].at[e] = v_cache[at + e];
      }
    }
  }
}

// K_LANE values as an MFMA operand, rounded to T (in pairs where the hardware converts pairs).
template <typename T>
__device__ inline typename kjit_mfma::Mfma<T>::Operand rounded(const float *from) {
  float values[K_LANE];
#pragma unroll
  for (int e = 0; e < K_LANE; ++e)
    values[e] = from[e];
  kjit::Vec<T, K_LANE> chunk;
  kjit::from_floats(values, chunk);
  return kjit_mfma::operand<T>(chunk.at);
}

} // namespace kjit_flash_attention_mfma

// The grid: x the tiles of rows, from the last (under CAUSAL the last rows see the most keys, and
// start first), y the q heads, z the sequences. Two blocks per compute unit, as gemm_mfma.
template <typename T, int HEAD_DIM, int CAUSAL, int BLOCK_N, int WAVES, int PAGED>
__global__ void __launch_bounds__(64 * WAVES, 2)
    flash_attention_mfma(T *KJIT_RESTRICT out, const T *KJIT_RESTRICT q, const T *KJIT_RESTRICT k,
                         const T *KJIT_RESTRICT v, const int *KJIT_RESTRICT cu_seqlens_q,
                         const int *KJIT_RESTRICT cu_seqlens_k, int total_q, int total_k,
                         int q_heads, int group, float scale_log2,
                         const int *KJIT_RESTRICT block_tables, int max_blocks, int page_size) {
  using namespace kjit_flash_attention_mfma;
  using Mfma = kjit_mfma::Mfma<T>;
  using Operand = typename Mfma::Operand;
  static_assert(KJIT_WARP_SIZE == 64, "MFMA runs on 64-lane wavefronts");
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head dim 64 or 128");
  static_assert(BLOCK_N == 32 || BLOCK_N == 64, "key tiles of 32 or 64");
  static_assert(PAGED == 0 || PAGED == 1, "PAGED 0 or 1");
  constexpr int THREADS = 64 * WAVES, BLOCK_M = 32 * WAVES;
  constexpr int S_TILES = BLOCK_N / 32, O_TILES = HEAD_DIM / 32;
  constexpr int LD_K = HEAD_DIM + 8, LD_V = BLOCK_N + 8; // padded rows, 16-byte aligned
  alignas(16) __shared__ T k_tile[BLOCK_N * LD_K];       // [key][d]
  alignas(16) __shared__ T v_tile[HEAD_DIM * LD_V];      // [d][key]: v transposed

  const int head = blockIdx.y, sequence = blockIdx.z;
  const int first = (gridDim.x - 1 - blockIdx.x) * BLOCK_M;
  const int q_start = cu_seqlens_q[sequence], q_length = cu_seqlens_q[sequence + 1] - q_start;
  if (first >= q_length)
    return;
  // PAGED: the sequence's pages, log2 of page_size, and whether its key count or a page is refused.
  const int *pages = PAGED ? block_tables + static_cast<long long>(sequence) * max_blocks : nullptr;
  const int page_shift = page_size == 32 ? 5 : 4;
  bool refused = false;
  int k_start = 0, k_length;
  if (PAGED) {
    k_length = cu_seqlens_k[sequence];
    refused = k_length < 0 || k_length > max_blocks * page_size;
    refused =
        any_page_outside<THREADS>(pages, refused ? 0 : (k_length + page_size - 1) >> page_shift,
                                  total_k >> page_shift) ||
        refused;
    if (refused)
      k_length = 0;
  } else {
    k_start = cu_seqlens_k[sequence];
    k_length = key_count(k_start, cu_seqlens_k[sequence + 1], total_k);
  }
  const int offset = k_length - q_length; // CAUSAL: row i sees keys j <= i + offset
  const int k_end = CAUSAL ? min(k_length, first + BLOCK_M + offset) : k_length;
  const int tiles = k_end > 0 ? (k_end + BLOCK_N - 1) / BLOCK_N : 0;
  const int kv_heads = q_heads / group, kv_column = head / group * HEAD_DIM;
  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64, half = lane / 32;
  const int row = first + wave * 32 + lane % 32; // this lane's query in the sequence
  // Its row of q and out, or -1 outside the sequence or the matrix (in 64 bits: never wraps).
  const long long at = static_cast<long long>(q_start) + row;
  const long long token = row < q_length && at >= 0 && at < total_q ? at : -1;
  const long long q_row_elements = static_cast<long long>(q_heads) * HEAD_DIM;

  kjit_mfma::Accumulator o[O_TILES] = {};
  float row_max = minus_infinity(); // the row's largest raw score so far
  float row_sum = 0.f;              // this lane's half of the row's sum of exp2
  if (tiles > 0) {
    // The lane's query as B operands (column l % 32, dims K_LANE * (l / 32) + e of each step).
    Operand q_operand[HEAD_DIM / K_PER_MFMA];
    const T *q_row = q + (token >= 0 ? token : 0) * q_row_elements + head * HEAD_DIM;
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / K_PER_MFMA; ++kk) {
      kjit::Vec<T, K_LANE> values;
      if (token >= 0)
        values = kjit::load_vec<K_LANE>(q_row + kk * K_PER_MFMA + half * K_LANE);
      else
#pragma unroll
        for (int e = 0; e < K_LANE; ++e)
          values.at[e] = kjit::from_float<T>(0.f);
      q_operand[kk] = kjit_mfma::operand<T>(values.at);
    }
    // The sequence's k and v as [k_length, kv_heads * HEAD_DIM] matrices, of which a tile reads
    // HEAD_DIM columns from kv_column.
    const long long kv_row_elements = static_cast<long long>(kv_heads) * HEAD_DIM;
    const T *k_rows = k + k_start * kv_row_elements + kv_column;
    const T *v_rows = v + k_start * kv_row_elements + kv_column;
    const bool vectors = kjit_gemm::aligned16(k) && kjit_gemm::aligned16(v);
    kjit_gemm::TileShare<BLOCK_N, HEAD_DIM, THREADS, T> k_share, v_share;
    // Reads the tile of keys from key0 into the shares' registers.
    const auto read_tiles = [&](int key0) {
      if (PAGED) {
        read_pages(k_share, v_share, k, v, pages, page_shift, key0, k_length, kv_row_elements,
                   kv_column, vectors);
      } else {
        k_share.read(k_rows, k_length, static_cast<int>(kv_row_elements), key0, 0, vectors);
        v_share.read(v_rows, k_length, static_cast<int>(kv_row_elements), key0, 0, vectors);
      }
    };
    read_tiles(0);
    // S^T's row p of a tile holds key tile_key(...) (see the header): this lane's row of k.
    const int p = lane % 32, k_row = tile_key(4 * (p / 8) + p % 4, p / 4 % 2);

    for (int j = 0; j < tiles; ++j) {
      const int key0 = j * BLOCK_N;
      __syncthreads(); // every wave is done with the previous tiles
      k_share.write([&](int r, int c, const kjit::Vec<T, 8> &chunk) {
        kjit::store_vec(k_tile + r * LD_K + c, chunk);
      });
      v_share.write([&](int r, int c, const kjit::Vec<T, 8> &chunk) {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          v_tile[(c + e) * LD_V + r] = chunk.at[e];
      });
      __syncthreads();
      if (j + 1 < tiles) // the next tiles, in flight during this one's MFMAs
        read_tiles(key0 + BLOCK_N);

      // S^T = K Q^T.
      kjit_mfma::Accumulator s[S_TILES] = {};
#pragma unroll
      for (int kk = 0; kk < HEAD_DIM / K_PER_MFMA; ++kk)
#pragma unroll
        for (int t = 0; t < S_TILES; ++t)
          s[t] = Mfma::run(kjit_mfma::operand(k_tile + (32 * t + k_row) * LD_K + kk * K_PER_MFMA +
                                              half * K_LANE),
                           q_operand[kk], s[t]);

      // Keys past the sequence, or (CAUSAL) past the row's diagonal, score -inf: only on the
      // tiles that hold such keys for some row of the block.
      float scores[BLOCK_N / 2];
#pragma unroll
      for (int t = 0; t < S_TILES; ++t)
#pragma unroll
        for (int r = 0; r < 16; ++r)
          scores[16 * t + r] = s[t][r];
      if (key0 + BLOCK_N > k_length || (CAUSAL && key0 + BLOCK_N - 1 > first + offset)) {
#pragma unroll
        for (int i = 0; i < BLOCK_N / 2; ++i) {
          const int key = key0 + 32 * (i / 16) + tile_key(i % 16, half);
          if (key >= k_length || (CAUSAL && key > row + offset))
            scores[i] = minus_infinity();
        }
      }

      // The online softmax: a row with no score yet keeps max -inf and subtracts 0, so that its
      // masked scores give exact zeros rather than NaN.
      float m = row_max;
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i)
        m = fmaxf(m, scores[i]);
      m = fmaxf(m, __shfl_xor(m, 32, 64));
      const float subtract = m == minus_infinity() ? 0.f : m * scale_log2;
      const float alpha = kjit::fast_exp2(row_max * scale_log2 - subtract);
      row_max = m;
      float total = 0.f;
#pragma unroll
      for (int i = 0; i < BLOCK_N / 2; ++i) {
        scores[i] = kjit::fast_exp2(fmaf(scores[i], scale_log2, -subtract));
        total += scores[i];
      }
      row_sum = row_sum * alpha + total;
#pragma unroll
      for (int d = 0; d < O_TILES; ++d) {
        o[d] *= alpha;
      }

      // O^T += V^T P^T, step c taking the scores' registers c * K_LANE .. + K_LANE - 1.
#pragma unroll
      for (int c = 0; c < BLOCK_N / K_PER_MFMA; ++c) {
        const Operand probabilities = rounded<T>(scores + c * K_LANE);
        const int key = 32 * (c * K_LANE / 16) + tile_key(c * K_LANE % 16, half);
#pragma unroll
        for (int d = 0; d < O_TILES; ++d)
          o[d] = Mfma::run(kjit_mfma::operand(v_tile + (32 * d + p) * LD_V + key), probabilities,
                           o[d]);
      }
    }
  }

  // out = O / the row's sum (0 for a row that saw no key, NaN for a refused paged sequence).
  const float sum = row_sum + __shfl_xor(row_sum, 32, 64);
  const float factor = refused     ? __int_as_float(0x7fffffff)
                       : sum > 0.f ? kjit::fast_reciprocal(sum)
                                   : 0.f;
  if (token < 0)
    return;
  T *out_row = out + token * q_row_elements + head * HEAD_DIM;
#pragma unroll
  for (int d = 0; d < O_TILES; ++d)
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      float values[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)
        values[e] = o[d][4 * g + e] * factor;
      kjit::Vec<T, 4> chunk;
      kjit::from_floats(values, chunk);
      kjit::store_vec(out_row + 32 * d + 8 * g + 4 * half, chunk);
    }
}

#endif

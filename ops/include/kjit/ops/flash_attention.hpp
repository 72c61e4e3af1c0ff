#pragma once
// Attention's forward over ragged batches (prefill), flash_attn_varlen_func's layout and
// semantics: q and out [total_q, q_heads, head_dim], k and v [total_k, kv_heads, head_dim], all
// contiguous device arrays of one element type; sequence b is rows cu_seqlens_q[b] ..
// cu_seqlens_q[b + 1] of q attending to rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of k and v
// (int32 device arrays of batch + 1 entries, non-decreasing, from 0 to total_q and total_k):
//
//   out[i, h] = sum_j softmax_j(scale * q[i, h] . k[j, h / g]) v[j, h / g],  g = q_heads / kv_heads
//
// Causal masks align to the bottom right, as FlashAttention's do: with n rows of q and m keys in
// a sequence, row i sees keys j <= i + m - n (the last row sees every key); a row that sees no
// key (n > m) gets zeros. Products accumulate in float; the softmax runs in float with exp2:
//
//   kjit::ops::AttentionShape shape{.batch = 2, .total_q = 300, .total_k = 300,
//                                   .max_seqlen_q = 200, .q_heads = 32, .kv_heads = 8,
//                                   .head_dim = 128, .causal = true, .scale = 0.08838835f};
//   kjit::ops::flash_attention(rt, out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape);
//
// flash_attention_paged computes the same with k and v in a paged cache (chunked prefill): see
// below.
#include "kjit/ops/element.hpp"
#include "kjit/ops/paged_attention.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

struct AttentionShape {
  int batch;            // sequences
  int total_q, total_k; // rows of q (and out), of k (and v)
  int max_seqlen_q;     // the longest sequence of q: rows past it in a sequence are not computed
  int q_heads, kv_heads, head_dim;
  bool causal;
  float scale; // the scores' factor, usually 1 / sqrt(head_dim)
};

// On gfx942 and gfx950 (MI300, MI350): the flash_attention_mfma template (MFMA), as below.
// On sm_90a (H100, H200) for Half and BFloat16, head_dim 64 or 128: the flash_attention template
// (wgmma, TMA, producer and consumer warpgroups); on other NVIDIA sm_80 and newer
// flash_attention_mma (mma.sync). Whatever cu_seqlens hold, the kernels read and write only
// inside q, k, v and out, and walk at most total_k keys per tile of rows (offsets outside [0,
// total_k] count as no keys); keys past a sequence's end are masked, but on sm_90a v's rows there
// still meet zero probabilities, so a NaN or infinity in a neighbouring sequence's v reaches the
// output, as in FlashAttention. Throws Error(bad_argument), one line, for a null pointer, a size
// out of range, q_heads not a multiple of kv_heads, a head dim other than 64 and 128, a scale
// that is not positive and finite, or an array that is not 16-byte aligned; on other AMD, NVIDIA
// before sm_80, Error(unsupported_target) naming the targets that work; what Runtime::kernel
// throws.
template <Element T>
void flash_attention(Runtime &rt, T *out, const T *q, const T *k, const T *v,
                     const int *cu_seqlens_q, const int *cu_seqlens_k, const AttentionShape &shape,
                     Stream stream = nullptr);

// A paged prefill's queries and tables (chunked prefill: each sequence's new tokens are the last
// of its keys, which are in the cache already). All arrays int32 on the device.
struct PagedPrefillBatch {
  const std::int32_t *cu_seqlens_q = nullptr; // [batch + 1]: q's rows of each sequence
  const std::int32_t *k_lens = nullptr;       // [batch]: keys of each sequence in the cache
  const std::int32_t *block_tables = nullptr; // [batch, max_blocks]: the pages of its keys
  int batch = 0;
  int max_blocks = 0;
  int total_q = 0;      // rows of q and out
  int max_seqlen_q = 0; // the longest sequence of q: rows past it in a sequence are not computed
  // Copy k_lens and block_tables to the host and check every entry before launching, as
  // check_decode_tables does, in this operator's terms ("kjit::ops::flash_attention_paged:
  // k_lens[1] is ..."); waits for the device.
  bool validate = false;
};

// flash_attention over a paged K/V cache, vLLM's and FlashInfer's NHD layout (paged_attention.hpp's
// PagedKvCache, format `model`: elements of T): q and out [total_q, q_heads, cache.head_dim];
// sequence b's rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] attend to its k_lens[b] keys, key j
// being row j % page_size of page block_tables[b][j / page_size]. Causal masks align to the bottom
// right as flash_attention's do (the last row sees every key). On sm_90a, Half and BFloat16,
// head_dim 64 or 128, page_size 16 or 32, GQA of any ratio: the flash_attention template with
// PAGED 1 for pages of 32 (copied as TMA boxes) and PAGED 2 for pages of 16 (a key's row per
// producer thread, cp.async); on gfx942 and gfx950 the same through flash_attention_mfma with
// PAGED 1 (key rows gathered by page). The tables stay on the device: a k_lens entry outside [0,
// max_blocks * page_size] or a page outside [0, num_blocks) among a sequence's first k_lens pages
// is refused by the kernel, which reads nothing outside the cache for it and writes NaN into
// every element of that sequence's output (`validate` turns it into Error(bad_argument) first).
// Throws Error(bad_argument), one line, for a null pointer, a size out of range, q_heads not a
// multiple of kv_heads, a head dim other than 64 and 128, a page size other than 16 and 32, an
// fp8 cache (its elements are not q's type), a scale that is not positive and finite, an array not
// 16-byte aligned; on other NVIDIA targets Error(unsupported_target) naming sm_90a, on other AMD
// ones naming gfx942 and gfx950; what Runtime::kernel throws.
template <Element T>
void flash_attention_paged(Runtime &rt, T *out, const T *q, int q_heads, const PagedKvCache &cache,
                           const PagedPrefillBatch &batch, bool causal, float scale,
                           Stream stream = nullptr);

namespace reference {

// The same in double precision, from host arrays (cu_seqlens of batch + 1 entries). Throws
// Error(bad_argument) for the wrapper's shape errors, and for arrays or cu_seqlens that do not
// match the shape.
template <Element T>
std::vector<double> flash_attention(std::span<const T> q, std::span<const T> k,
                                    std::span<const T> v, std::span<const int> cu_seqlens_q,
                                    std::span<const int> cu_seqlens_k, const AttentionShape &shape);

// flash_attention_paged in double precision from host arrays: the caches [num_blocks, page_size,
// kv_heads, head_dim] each, cu_seqlens_q [batch + 1], k_lens [batch], block_tables [batch,
// max_blocks] (checked as `validate` checks them: Error(bad_argument) naming the first bad entry).
// Gathers each sequence's keys and computes reference::flash_attention.
template <Element T>
std::vector<double>
flash_attention_paged(std::span<const T> q, std::span<const T> k_cache, std::span<const T> v_cache,
                      std::span<const int> cu_seqlens_q, std::span<const int> k_lens,
                      std::span<const int> block_tables, int q_heads, int kv_heads, int head_dim,
                      int page_size, bool causal, float scale);

} // namespace reference

} // namespace kjit::ops

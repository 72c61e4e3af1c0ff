#pragma once
// Paged attention for decode and the KV-cache write, over vLLM's and FlashInfer's NHD paged cache:
//
//   kjit::ops::reshape_and_cache(rt, key, value, cache, slot_mapping, tokens);   // new tokens
//   kjit::ops::paged_attention_decode(rt, out, q, q_heads, cache, batch, scale, workspace);
//
// The cache: k and v [num_blocks, page_size, kv_heads, head_dim] (device pointers, contiguous),
// each element of the queries' type T or an fp8 e4m3fn byte whose value is decode_e4m3(byte) *
// k_scale (v_scale). A slot is one row of a page: slot = page * page_size + row.
//
// Decode: q and out [batch, q_heads, head_dim]; block_tables [batch, max_blocks] int32 names the
// pages of each sequence in order, seq_lens [batch] int32 how many tokens each has. For each
// sequence s and query head h, with kv head g = h / (q_heads / kv_heads) (GQA; MQA: kv_heads 1):
//
//   out[s, h] = sum_t softmax_t(scale * q[s, h] . K[s, t, g]) V[s, t, g],   t < seq_lens[s]
//
// where K[s, t, g] is k[block_tables[s][t / page_size], t % page_size, g]. Computed in float
// (scores, online softmax, output), rounded once to T. A sequence of length 0 gets zeros.
//
// The tables are device memory, read by the kernel alone: the host checks what it holds (shapes,
// types, head dims, the capacity), and the kernel checks every entry it reads. A sequence whose
// length is negative or past max_seq_len, or whose table names a page outside [0, num_blocks),
// gets NaN in every element of its output and nothing outside the cache is read; the other
// sequences are unaffected. DecodeBatch::validate copies the tables to the host first and turns
// such an entry into Error(bad_argument) naming it (a debug mode: it waits for the device).
#include "kjit/ops/element.hpp"
#include "kjit/ops/rotary.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

enum class KvCacheFormat {
  model,    // elements of the queries' type T
  fp8_e4m3, // e4m3fn bytes, each times its tensor's scale
};

struct PagedKvCache {
  void *k = nullptr;
  void *v = nullptr;
  int num_blocks = 0;
  int page_size = 16; // 16 or 32 for decode
  int kv_heads = 0;
  int head_dim = 0; // 64 or 128 for decode
  KvCacheFormat format = KvCacheFormat::model;
  float k_scale = 1.0f; // fp8 only: the value of a stored byte is decode_e4m3(byte) * scale
  float v_scale = 1.0f;
};

struct DecodeBatch {
  const std::int32_t *block_tables = nullptr; // [batch, max_blocks], device
  const std::int32_t *seq_lens = nullptr;     // [batch], device
  int batch = 0;
  int max_blocks = 0;
  // The longest sequence the caller allows (vLLM's max_seq_len): the splits cover it. 0: the
  // tables' capacity, max_blocks * page_size.
  int max_seq_len = 0;
  // Copy the tables to the host and check every entry before launching (waits for the device).
  bool validate = false;
};

// Scratch device memory for split-KV (flash-decoding): partial outputs and their log-sum-exps.
// Null: one split per sequence, always correct, slower for few long sequences.
struct DecodeWorkspace {
  void *data = nullptr;
  std::size_t bytes = 0;
};

// The workspace bytes paged_attention_decode uses for this shape on the Runtime's device (0 when
// it does not split), for either element type. The split count follows the registers of the
// kernel, so this compiles it (or finds it in the cache) as the call does. Throws what
// paged_attention_decode's checks throw.
std::size_t paged_attention_workspace_bytes(Runtime &rt, int q_heads, const PagedKvCache &cache,
                                            const DecodeBatch &batch);

// T: Half or BFloat16. Throws Error(bad_argument), one line, for: a null pointer; a non-positive
// count; q_heads not a multiple of kv_heads; head_dim other than 64 or 128; page_size other than
// 16 or 32; max_seq_len outside [0, max_blocks * page_size]; a scale that is not finite (fp8
// scales: not positive); q, out or a cache not aligned to its 16-byte (fp8: 8-byte) loads; a
// workspace smaller than paged_attention_workspace_bytes; with `validate`, a table entry as above.
// What Runtime::kernel throws.
template <Element T>
void paged_attention_decode(Runtime &rt, T *out, const T *q, int q_heads, const PagedKvCache &cache,
                            const DecodeBatch &batch, float scale, DecodeWorkspace workspace = {},
                            Stream stream = nullptr);

// RoPE applied to the keys on their way into the cache, as rotary_embedding applies it
// (rotary.hpp): positions [tokens] int64, cos_sin_cache [max_position, rotary_dim] of T.
template <Element T> struct KeyRotation {
  const std::int64_t *positions = nullptr;
  const T *cos_sin_cache = nullptr;
  int max_position = 0;
  int rotary_dim = 0;
  RotaryStyle style = RotaryStyle::neox;
};

// Writes key and value [tokens, kv_heads, head_dim] (rows `key_stride` and `value_stride`
// elements apart, 0: kv_heads * head_dim) into the cache at slot_mapping [tokens] (int64, device):
// a negative slot skips its token (padding); a slot at or past num_blocks * page_size is skipped
// too (the kernel never writes outside the cache). With `rotation`, each key's first rotary_dim
// elements are rotated first (a position outside [0, max_position) leaves it unrotated). fp8: the
// stored byte is e4m3 of x / scale, rounded to nearest even, saturated to +-448. T: Half or
// BFloat16. Throws Error(bad_argument) for a null pointer, a non-positive count, head_dim outside
// [8, 1024] or not a multiple of 8, a stride shorter than a row, a rotary_dim odd or past head_dim,
// a non-positive fp8 scale; what Runtime::kernel throws.
template <Element T>
void reshape_and_cache(Runtime &rt, const T *key, const T *value, const PagedKvCache &cache,
                       const std::int64_t *slot_mapping, int tokens, std::int64_t key_stride = 0,
                       std::int64_t value_stride = 0, const KeyRotation<T> *rotation = nullptr,
                       Stream stream = nullptr);

// Throws Error(bad_argument) naming the first entry paged_attention_decode would refuse: a
// sequence length outside [0, max_seq_len] (0: max_blocks * page_size), or a page of its first
// seq_len tokens outside [0, num_blocks). For callers that hold the tables on the host.
void check_decode_tables(std::span<const std::int32_t> block_tables,
                         std::span<const std::int32_t> seq_lens, int max_blocks, int page_size,
                         int num_blocks, int max_seq_len = 0);

namespace reference {

// Decode in double precision over caches given as the values they hold (decoded and scaled),
// [num_blocks, page_size, kv_heads, head_dim] each; q [batch, q_heads, head_dim]. The tables must
// be valid (check_decode_tables).
std::vector<double>
paged_attention_decode(std::span<const double> q, std::span<const double> k_cache,
                       std::span<const double> v_cache, std::span<const std::int32_t> block_tables,
                       std::span<const std::int32_t> seq_lens, int q_heads, int kv_heads,
                       int head_dim, int page_size, int max_blocks, double scale);

// What reshape_and_cache writes, before rounding to the cache's format: each token's key
// (rotated as reference::rotary_embedding does when `rotation` is set: positions and
// cos_sin_cache of it are read from the spans) and value go to their slot's rows of k_cache and
// v_cache ([slots, kv_heads, head_dim]); other rows are left as they are. key and value are
// contiguous [tokens, kv_heads, head_dim].
template <Element T>
void reshape_and_cache(std::span<const T> key, std::span<const T> value,
                       std::span<const std::int64_t> slot_mapping, int kv_heads, int head_dim,
                       std::span<double> k_cache, std::span<double> v_cache,
                       std::span<const std::int64_t> positions = {},
                       std::span<const T> cos_sin_cache = {}, int rotary_dim = 0,
                       RotaryStyle style = RotaryStyle::neox);

} // namespace reference

} // namespace kjit::ops

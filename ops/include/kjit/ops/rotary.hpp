#pragma once
// Rotary position embedding applied in place to query and key, as vLLM's rotary_embedding:
//
//   kjit::ops::rotary_embedding(rt, positions, query, key, cos_sin_cache, max_position, tokens,
//                               q_heads, kv_heads, head_size, rotary_dim, RotaryStyle::neox);
//
// positions [tokens] (int64), query [tokens, q_heads * head_size], key [tokens, kv_heads *
// head_size], cos_sin_cache [max_position, rotary_dim]: rotary_dim / 2 cosines then as many
// sines per position. All device pointers, contiguous. The first rotary_dim elements of each head
// are rotated; the rest are left untouched. A position outside [0, max_position) leaves its
// token unrotated (the kernel never reads outside the cache).
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

// Which elements of a head form a rotated pair (x, y) for frequency i < rotary_dim / 2.
enum class RotaryStyle {
  neox, // (x[i], x[i + rotary_dim / 2]): GPT-NeoX, Llama
  gptj, // (x[2i], x[2i + 1]): GPT-J, interleaved
};

// Throws Error(bad_argument) for a non-positive count or size, an odd rotary_dim, rotary_dim >
// head_size, head_size > 1024 or a null pointer; what Runtime::kernel throws.
template <Element T>
void rotary_embedding(Runtime &rt, const std::int64_t *positions, T *query, T *key,
                      const T *cos_sin_cache, int max_position, int tokens, int q_heads,
                      int kv_heads, int head_size, int rotary_dim, RotaryStyle style,
                      Stream stream = nullptr);

namespace reference {

// The rotation of x [positions.size(), heads * head_size] (query or key), in double precision.
template <Element T>
std::vector<double> rotary_embedding(std::span<const std::int64_t> positions, std::span<const T> x,
                                     std::span<const T> cos_sin_cache, int heads, int head_size,
                                     int rotary_dim, RotaryStyle style);

} // namespace reference

} // namespace kjit::ops

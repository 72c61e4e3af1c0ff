#include "kjit/ops/paged_attention.hpp"

#include "kjit/templates/library.hpp"
#include "launch.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kjit::ops {

namespace {

constexpr std::string_view op = "reshape_and_cache";

std::string to_string(std::int64_t value) { return std::to_string(value); }

// The widest VEC (elements, or pairs of a rotation, per access) that keeps every access aligned
// and at most 16 bytes: VEC elements of key, value and the cos/sin rows, VEC (NeoX) or 2 * VEC
// (GPT-J) of a rotated key, VEC bytes of an fp8 cache, and that divides what each thread walks
// (items of two VEC pieces: 2 VEC elements where nothing rotates).
template <Element T>
int elements_per_access(const T *key, const T *value, const PagedKvCache &cache,
                        std::int64_t key_stride, std::int64_t value_stride,
                        const KeyRotation<T> *rotation) {
  const bool fp8 = cache.format == KvCacheFormat::fp8_e4m3;
  for (int vec : {8, 4, 2}) {
    const std::size_t bytes = vec * sizeof(T);
    const std::size_t cache_bytes = fp8 ? vec : bytes;
    bool fits = cache.head_dim % (2 * vec) == 0 && key_stride % vec == 0 &&
                value_stride % vec == 0 && detail::aligned(key, bytes) &&
                detail::aligned(value, bytes) && detail::aligned(cache.k, cache_bytes) &&
                detail::aligned(cache.v, cache_bytes);
    if (rotation != nullptr) {
      const int rotated = rotation->rotary_dim;
      const bool neox = rotation->style == RotaryStyle::neox;
      const std::size_t pair_bytes = neox ? bytes : 2 * bytes;
      fits = fits && pair_bytes <= 16 && (rotated / 2) % vec == 0 &&
             (cache.head_dim - rotated) % (2 * vec) == 0 && (neox || (2 * cache_bytes) <= 16) &&
             detail::aligned(rotation->cos_sin_cache, bytes) && rotation->max_position > 0;
    }
    if (fits)
      return vec;
  }
  return 1;
}

} // namespace

template <Element T>
void reshape_and_cache(Runtime &rt, const T *key, const T *value, const PagedKvCache &cache,
                       const std::int64_t *slot_mapping, int tokens, std::int64_t key_stride,
                       std::int64_t value_stride, const KeyRotation<T> *rotation, Stream stream) {
  static_assert(!std::is_same_v<T, float>, "reshape_and_cache takes Half or BFloat16");
  detail::require_pointer(key, op, "key");
  detail::require_pointer(value, op, "value");
  detail::require_pointer(cache.k, op, "k cache");
  detail::require_pointer(cache.v, op, "v cache");
  detail::require_pointer(slot_mapping, op, "slot_mapping");
  detail::require(tokens > 0 && cache.kv_heads > 0 && cache.num_blocks > 0 && cache.page_size > 0,
                  op, "tokens, kv_heads, num_blocks and page_size must be positive");
  detail::require(cache.head_dim >= 8 && cache.head_dim <= 1024 && cache.head_dim % 8 == 0, op,
                  [&] {
                    return "head_dim " + to_string(cache.head_dim) +
                           " is not supported (a multiple of 8 in [8, 1024])";
                  });
  const std::int64_t row = std::int64_t{cache.kv_heads} * cache.head_dim;
  key_stride = key_stride == 0 ? row : key_stride;
  value_stride = value_stride == 0 ? row : value_stride;
  detail::require(key_stride >= row && value_stride >= row, op, [&] {
    return "key_stride " + to_string(key_stride) + " and value_stride " + to_string(value_stride) +
           " must be at least kv_heads * head_dim = " + to_string(row);
  });
  const bool fp8 = cache.format == KvCacheFormat::fp8_e4m3;
  detail::require(!fp8 || (cache.k_scale > 0 && std::isfinite(cache.k_scale) && cache.v_scale > 0 &&
                           std::isfinite(cache.v_scale)),
                  op, "the fp8 cache's k_scale and v_scale must be positive and finite");
  if (rotation != nullptr) {
    detail::require_pointer(rotation->positions, op, "positions");
    detail::require_pointer(rotation->cos_sin_cache, op, "cos_sin_cache");
    detail::require(rotation->max_position > 0, op, "max_position must be positive");
    detail::require(rotation->rotary_dim >= 2 && rotation->rotary_dim % 2 == 0 &&
                        rotation->rotary_dim <= cache.head_dim,
                    op, [&] {
                      return "rotary_dim " + to_string(rotation->rotary_dim) +
                             " must be even and in [2, head_dim = " + to_string(cache.head_dim) +
                             "]";
                    });
  }
  const int vec = elements_per_access(key, value, cache, key_stride, value_stride, rotation);
  // A thread per item of 2 vec elements of a token (256 at most), a block per 2 tokens (TOKENS:
  // the fastest of 1, 2, 4 and 8 for bf16, fp8 and RoPE on the H200, BENCHMARKS.md).
  constexpr int tokens_per_block = 2;
  static const Template &tmpl = templates::find("reshape_and_cache");
  const int rope = rotation == nullptr ? 0 : rotation->style == RotaryStyle::neox ? 1 : 2;
  const Kernel &kernel = rt.kernel(tmpl, {{"T", element_name<T>()},
                                          {"KV_FP8", fp8 ? 1 : 0},
                                          {"HEAD_DIM", cache.head_dim},
                                          {"ROPE", rope},
                                          {"ROTARY_DIM", rope != 0 ? rotation->rotary_dim : 0},
                                          {"VEC", vec},
                                          {"TOKENS", tokens_per_block}});
  const int warp = rt.default_device().target().warp_size();
  const int items = static_cast<int>(row / vec);
  const int threads = std::min(256, detail::divide_up(items, warp) * warp);
  const std::int64_t *positions = rotation != nullptr ? rotation->positions : nullptr;
  const T *cos_sin_cache = rotation != nullptr ? rotation->cos_sin_cache : nullptr;
  kernel.launch({.grid = static_cast<unsigned>(detail::divide_up(tokens, tokens_per_block)),
                 .block = static_cast<unsigned>(threads),
                 .stream = stream},
                key, value, cache.k, cache.v, reinterpret_cast<const long long *>(slot_mapping),
                reinterpret_cast<const long long *>(positions), cos_sin_cache,
                rotation != nullptr ? rotation->max_position : 0, fp8 ? 1.0f / cache.k_scale : 1.0f,
                fp8 ? 1.0f / cache.v_scale : 1.0f, cache.kv_heads,
                static_cast<long long>(key_stride), static_cast<long long>(value_stride),
                static_cast<long long>(cache.num_blocks) * cache.page_size, tokens);
}

namespace reference {

template <Element T>
void reshape_and_cache(std::span<const T> key, std::span<const T> value,
                       std::span<const std::int64_t> slot_mapping, int kv_heads, int head_dim,
                       std::span<double> k_cache, std::span<double> v_cache,
                       std::span<const std::int64_t> positions, std::span<const T> cos_sin_cache,
                       int rotary_dim, RotaryStyle style) {
  const std::vector<double> keys = rotary_dim > 0
                                       ? rotary_embedding<T>(positions, key, cos_sin_cache,
                                                             kv_heads, head_dim, rotary_dim, style)
                                       : std::vector<double>(key.size());
  const std::size_t row = static_cast<std::size_t>(kv_heads) * head_dim;
  const std::size_t slots = k_cache.size() / row;
  for (std::size_t t = 0; t < slot_mapping.size(); ++t) {
    const std::int64_t slot = slot_mapping[t];
    if (slot < 0 || static_cast<std::size_t>(slot) >= slots)
      continue;
    for (std::size_t i = 0; i < row; ++i) {
      k_cache[slot * row + i] = rotary_dim > 0 ? keys[t * row + i] : to_double(key[t * row + i]);
      v_cache[slot * row + i] = to_double(value[t * row + i]);
    }
  }
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void reshape_and_cache<T>(Runtime &, const T *, const T *, const PagedKvCache &,        \
                                     const std::int64_t *, int, std::int64_t, std::int64_t,        \
                                     const KeyRotation<T> *, Stream);                              \
  template void reference::reshape_and_cache<T>(                                                   \
      std::span<const T>, std::span<const T>, std::span<const std::int64_t>, int, int,             \
      std::span<double>, std::span<double>, std::span<const std::int64_t>, std::span<const T>,     \
      int, RotaryStyle);
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops

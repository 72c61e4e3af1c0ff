#include "kjit/ops/rotary.hpp"

#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "variants.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kjit::ops {

namespace {

constexpr std::string_view op = "rotary_embedding";

// The widest VEC (pairs per packed access) that keeps every access of the kernel aligned and at
// most 16 bytes: VEC elements of the cache, VEC (NeoX) or 2 * VEC (GPT-J) of a head. VEC 1 reads
// element by element, aligned wherever T is.
template <Element T>
int pairs_per_access(const T *query, const T *key, const T *cos_sin_cache, int head_size,
                     int rotary_dim, RotaryStyle style) {
  for (int vec : {8, 4, 2}) {
    const int head_elements = style == RotaryStyle::neox ? vec : 2 * vec;
    const std::size_t head_bytes = head_elements * sizeof(T);
    if (head_bytes <= 16 && (rotary_dim / 2) % vec == 0 && head_size % head_elements == 0 &&
        detail::aligned(query, head_bytes) && detail::aligned(key, head_bytes) &&
        detail::aligned(cos_sin_cache, vec * sizeof(T)))
      return vec;
  }
  return 1;
}

} // namespace

namespace detail {

template <Element T>
ChosenVariant rotary_variant(int head_size, int rotary_dim, RotaryStyle style, const T *query,
                             const T *key, const T *cos_sin_cache) {
  static const Template &tmpl = templates::find("rotary_embedding");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"HEAD_SIZE", head_size},
           {"ROTARY_DIM", rotary_dim},
           {"NEOX", style == RotaryStyle::neox ? 1 : 0},
           {"VEC", pairs_per_access(query, key, cos_sin_cache, head_size, rotary_dim, style)}}};
}

} // namespace detail

template <Element T>
void rotary_embedding(Runtime &rt, const std::int64_t *positions, T *query, T *key,
                      const T *cos_sin_cache, int max_position, int tokens, int q_heads,
                      int kv_heads, int head_size, int rotary_dim, RotaryStyle style,
                      Stream stream) {
  detail::require_pointer(positions, op, "positions");
  detail::require_pointer(query, op, "query");
  detail::require_pointer(key, op, "key");
  detail::require_pointer(cos_sin_cache, op, "cos_sin_cache");
  detail::require(tokens > 0 && q_heads > 0 && kv_heads > 0 && max_position > 0, op,
                  "tokens, q_heads, kv_heads and max_position must be positive");
  detail::require(head_size >= 2 && head_size <= 1024, op, [&] {
    return "head_size " + std::to_string(head_size) + " is outside [2, 1024]";
  });
  detail::require(rotary_dim >= 2 && rotary_dim <= head_size && rotary_dim % 2 == 0, op, [&] {
    return "rotary_dim " + std::to_string(rotary_dim) +
           " must be even and in [2, head_size = " + std::to_string(head_size) + "]";
  });
  const detail::ChosenVariant variant =
      detail::rotary_variant(head_size, rotary_dim, style, query, key, cos_sin_cache);
  const int vec = variant.integer("VEC");
  const int warp = rt.default_device().target().warp_size();
  const int items = (q_heads + kv_heads) * (rotary_dim / 2 / vec);
  const int threads = std::min(512, detail::divide_up(items, warp) * warp);
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  kernel.launch({.grid = tokens, .block = threads, .stream = stream}, positions, query, key,
                cos_sin_cache, max_position, q_heads, kv_heads);
}

namespace reference {

template <Element T>
std::vector<double> rotary_embedding(std::span<const std::int64_t> positions, std::span<const T> x,
                                     std::span<const T> cos_sin_cache, int heads, int head_size,
                                     int rotary_dim, RotaryStyle style) {
  std::vector<double> out(x.size());
  std::transform(x.begin(), x.end(), out.begin(), [](T value) { return to_double(value); });
  const int half = rotary_dim / 2;
  const auto max_position = static_cast<std::int64_t>(cos_sin_cache.size() / rotary_dim);
  for (std::size_t token = 0; token < positions.size(); ++token) {
    if (positions[token] < 0 || positions[token] >= max_position)
      continue;
    const T *cos = cos_sin_cache.data() + positions[token] * rotary_dim;
    for (int head = 0; head < heads; ++head) {
      double *h = out.data() + (token * heads + head) * head_size;
      for (int i = 0; i < half; ++i) {
        const int xi = style == RotaryStyle::neox ? i : 2 * i;
        const int yi = style == RotaryStyle::neox ? i + half : 2 * i + 1;
        const double c = to_double(cos[i]), s = to_double(cos[half + i]);
        const double a = h[xi], b = h[yi];
        h[xi] = a * c - b * s;
        h[yi] = b * c + a * s;
      }
    }
  }
  return out;
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void rotary_embedding<T>(Runtime &, const std::int64_t *, T *, T *, const T *, int,     \
                                    int, int, int, int, int, RotaryStyle, Stream);                 \
  template detail::ChosenVariant detail::rotary_variant<T>(int, int, RotaryStyle, const T *,       \
                                                           const T *, const T *);                  \
  template std::vector<double> reference::rotary_embedding<T>(                                     \
      std::span<const std::int64_t>, std::span<const T>, std::span<const T>, int, int, int,        \
      RotaryStyle);
KJIT_INSTANTIATE(float)
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops

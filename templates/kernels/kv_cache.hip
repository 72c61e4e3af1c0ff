// Writes new tokens' keys and values into a paged KV cache (vLLM's reshape_and_cache_flash, the
// NHD layout paged_attention_decode reads): key and value are [tokens, kv_heads, HEAD_DIM] with
// `key_stride` and `value_stride` elements from one token's row to the next (a slice of a fused
// qkv tensor), the caches [blocks, PAGE, kv_heads, HEAD_DIM]. Token t goes to page
// slot_mapping[t] / PAGE, row slot_mapping[t] % PAGE. A negative slot (-1: padding) is skipped,
// and so is a slot at or past `slots` (blocks * PAGE): nothing is written outside the cache.
//
// ROPE 1 (NeoX) or 2 (GPT-J) rotates the first ROTARY_DIM elements of each key head by the angle
// of positions[t] on the way, with rotary_embedding's conventions (rotary.hip): cos_sin_cache is
// [max_position, ROTARY_DIM], ROTARY_DIM / 2 cosines then as many sines; pair i is (x[i],
// x[i + ROTARY_DIM / 2]) for NeoX, (x[2i], x[2i + 1]) for GPT-J; x' = x cos - y sin, y' = y cos +
// x sin. A position outside [0, max_position) leaves the key unrotated, as rotary_embedding does.
//
// KV_FP8 1 stores e4m3fn bytes of x * inverse_scale (the per-tensor scales' reciprocals), rounded
// to nearest even and saturated to +-448, converted in integer arithmetic (hiprtc has no fp8
// type).
//
// One block per token; each thread moves VEC elements (VEC pairs of a rotation) at a time.

namespace kjit_kv_cache {

__device__ inline unsigned char to_e4m3(float x) {
  const unsigned sign = (__float_as_uint(x) >> 24) & 0x80u;
  if (x != x)
    return static_cast<unsigned char>(sign | 0x7fu);
  const float magnitude = fminf(fabsf(x), 448.0f);
  unsigned code;
  if (magnitude < 0x1p-6f) {
    // Subnormals, in units of 2^-9; 8 units is the smallest normal, code 0x08.
    code = static_cast<unsigned>(__float2int_rn(magnitude * 512.0f));
  } else {
    // Round the float's mantissa to 3 bits (nearest even; a carry moves into the exponent), then
    // rebias the exponent from 127 to 7. 448 is exact, so nothing rounds past it.
    const unsigned u = __float_as_uint(magnitude);
    code = ((u + 0x7ffffu + ((u >> 20) & 1u)) >> 20) - (120u << 3);
  }
  return static_cast<unsigned char>(sign | code);
}

template <typename T, int KV_FP8> struct CacheElement { typedef T type; };
template <typename T> struct CacheElement<T, 1> { typedef unsigned char type; };

// Stores VEC floats at `to`, as T or as e4m3 bytes scaled by `inverse_scale`.
template <typename T, int KV_FP8, int VEC>
__device__ inline void store(typename CacheElement<T, KV_FP8>::type *to, const float (&f)[VEC],
                             float inverse_scale) {
  if (KV_FP8) {
    kjit::Vec<unsigned char, VEC> bytes;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      bytes.at[e] = to_e4m3(f[e] * inverse_scale);
    kjit::store_vec(reinterpret_cast<unsigned char *>(to), bytes);
  } else {
    kjit::Vec<T, VEC> v;
    kjit::from_floats(f, v);
    kjit::store_vec(reinterpret_cast<T *>(to), v);
  }
}

template <typename T, int VEC> __device__ inline void load(const T *from, float (&f)[VEC]) {
  kjit::to_floats(kjit::load_vec<VEC>(from), f);
}

} // namespace kjit_kv_cache

template <typename T, int KV_FP8, int HEAD_DIM, int ROPE, int ROTARY_DIM, int VEC>
__global__ void
reshape_and_cache(const T *KJIT_RESTRICT key, const T *KJIT_RESTRICT value, void *k_cache_bytes,
                  void *v_cache_bytes, const long long *KJIT_RESTRICT slot_mapping,
                  const long long *KJIT_RESTRICT positions, const T *KJIT_RESTRICT cos_sin_cache,
                  int max_position, float k_inverse_scale, float v_inverse_scale, int kv_heads,
                  long long key_stride, long long value_stride, long long slots) {
  using namespace kjit_kv_cache;
  typedef typename CacheElement<T, KV_FP8>::type C;
  constexpr int ROTATED = ROPE != 0 ? ROTARY_DIM : 0;
  static_assert(ROTATED % 2 == 0 && ROTATED <= HEAD_DIM, "ROTARY_DIM: even, <= HEAD_DIM");
  static_assert((ROTATED / 2) % VEC == 0 && (HEAD_DIM - ROTATED) % VEC == 0,
                "VEC must divide ROTARY_DIM / 2 and HEAD_DIM - ROTARY_DIM");
  constexpr int PAIR_ITEMS = ROTATED / 2 / VEC; // a key head's packs of VEC pairs
  constexpr int KEY_ITEMS = PAIR_ITEMS + (HEAD_DIM - ROTATED) / VEC;
  constexpr int VALUE_ITEMS = HEAD_DIM / VEC;
  const long long token = blockIdx.x;
  const long long slot = slot_mapping[token];
  if (slot < 0 || slot >= slots)
    return;
  C *k_cache = static_cast<C *>(k_cache_bytes) + slot * kv_heads * HEAD_DIM;
  C *v_cache = static_cast<C *>(v_cache_bytes) + slot * kv_heads * HEAD_DIM;
  const T *key_row = key + token * key_stride;
  const T *value_row = value + token * value_stride;
  bool rotate = false;
  const T *cos = cos_sin_cache;
  if (ROPE != 0) {
    const long long position = positions[token];
    rotate = position >= 0 && position < max_position;
    cos = cos_sin_cache + (rotate ? position : 0) * ROTARY_DIM;
  }
  const int key_items = kv_heads * KEY_ITEMS;
  const int items = key_items + kv_heads * VALUE_ITEMS;
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    if (item >= key_items) {
      const int at = (item - key_items) * VEC; // heads are contiguous: [kv_heads * HEAD_DIM]
      float f[VEC];
      load(value_row + at, f);
      store<T, KV_FP8>(v_cache + at, f, v_inverse_scale);
      continue;
    }
    const int head = item / KEY_ITEMS, index = item % KEY_ITEMS;
    const T *from = key_row + head * HEAD_DIM;
    C *to = k_cache + head * HEAD_DIM;
    if (index >= PAIR_ITEMS) {
      const int at = ROTATED + (index - PAIR_ITEMS) * VEC;
      float f[VEC];
      load(from + at, f);
      store<T, KV_FP8>(to + at, f, k_inverse_scale);
      continue;
    }
    // VEC pairs from `first`: x and y as rotary.hip pairs them.
    const int first = index * VEC;
    float x[VEC], y[VEC];
    if (ROPE == 1) {
      load(from + first, x);
      load(from + ROTATED / 2 + first, y);
    } else {
      float both[2 * VEC];
      load(from + 2 * first, both);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        x[e] = both[2 * e];
        y[e] = both[2 * e + 1];
      }
    }
    if (rotate) {
      float c[VEC], sn[VEC];
      load(cos + first, c);
      load(cos + ROTATED / 2 + first, sn);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float a = x[e], b = y[e];
        x[e] = a * c[e] - b * sn[e];
        y[e] = b * c[e] + a * sn[e];
      }
    }
    if (ROPE == 1) {
      store<T, KV_FP8>(to + first, x, k_inverse_scale);
      store<T, KV_FP8>(to + ROTATED / 2 + first, y, k_inverse_scale);
    } else {
      float both[2 * VEC];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        both[2 * e] = x[e];
        both[2 * e + 1] = y[e];
      }
      store<T, KV_FP8>(to + 2 * first, both, k_inverse_scale);
    }
  }
}

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
// One block per TOKENS tokens (`tokens` in all); each thread moves an item of two VEC-element
// pieces (VEC pairs of a rotation: x and y; elsewhere two pieces half a row apart) of each of them
// at a time, so that every thread moves as many bytes, rotated or not, and keeps 2 TOKENS loads in
// flight: it loads the item of every token before it stores any. A write of the cache is a copy,
// bound by the bytes in flight per multiprocessor: those of a rotated item's thread bound the
// registers of all.

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

// Two floats as e4m3 bytes, `a` in the low byte: on sm_89 and newer in one instruction (rounding
// to nearest even and saturating to +-448 as to_e4m3 does; a NaN keeps to_e4m3's sign), elsewhere
// through to_e4m3.
__device__ inline unsigned short to_e4m3_pair(float a, float b) {
#if KJIT_CUDA && __CUDA_ARCH__ >= 890
  if (a == a && b == b) {
    unsigned short pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(b), "f"(a));
    return pair;
  }
#endif
  return static_cast<unsigned short>(to_e4m3(a) | (to_e4m3(b) << 8));
}

template <typename T, int KV_FP8> struct CacheElement { typedef T type; };
template <typename T> struct CacheElement<T, 1> { typedef unsigned char type; };

// Stores VEC floats at `to`, as T or as e4m3 bytes scaled by `inverse_scale`.
template <typename T, int KV_FP8, int VEC>
__device__ inline void store(typename CacheElement<T, KV_FP8>::type *to, const float (&f)[VEC],
                             float inverse_scale) {
  if (KV_FP8) {
    kjit::Vec<unsigned char, VEC> bytes;
    if (VEC == 1) {
      bytes.at[0] = to_e4m3(f[0] * inverse_scale);
    } else {
#pragma unroll
      for (int e = 0; e + 1 < VEC; e += 2) {
        const unsigned short pair = to_e4m3_pair(f[e] * inverse_scale, f[e + 1] * inverse_scale);
        bytes.at[e] = static_cast<unsigned char>(pair & 0xffu);
        bytes.at[e + 1] = static_cast<unsigned char>(pair >> 8);
      }
    }
    kjit::store_vec(reinterpret_cast<unsigned char *>(to), bytes);
  } else {
    kjit::Vec<T, VEC> v;
    kjit::from_floats(f, v);
    kjit::store_vec(reinterpret_cast<T *>(to), v);
  }
}

} // namespace kjit_kv_cache

template <typename T, int KV_FP8, int HEAD_DIM, int ROPE, int ROTARY_DIM, int VEC, int TOKENS>
__global__ void
reshape_and_cache(const T *KJIT_RESTRICT key, const T *KJIT_RESTRICT value, void *k_cache_bytes,
                  void *v_cache_bytes, const long long *KJIT_RESTRICT slot_mapping,
                  const long long *KJIT_RESTRICT positions, const T *KJIT_RESTRICT cos_sin_cache,
                  int max_position, float k_inverse_scale, float v_inverse_scale, int kv_heads,
                  long long key_stride, long long value_stride, long long slots, int tokens) {
  using namespace kjit_kv_cache;
  typedef typename CacheElement<T, KV_FP8>::type C;
  constexpr int ROTATED = ROPE != 0 ? ROTARY_DIM : 0;
  static_assert(ROTATED % 2 == 0 && ROTATED <= HEAD_DIM, "ROTARY_DIM: even, <= HEAD_DIM");
  static_assert((ROTATED / 2) % VEC == 0 && (HEAD_DIM - ROTATED) % (2 * VEC) == 0,
                "VEC must divide ROTARY_DIM / 2, and 2 VEC HEAD_DIM - ROTARY_DIM");
  constexpr int PAIR_ITEMS = ROTATED / 2 / VEC; // a key head's packs of VEC pairs
  constexpr int KEY_ITEMS = PAIR_ITEMS + (HEAD_DIM - ROTATED) / (2 * VEC);
  constexpr int VALUE_ITEMS = HEAD_DIM / (2 * VEC);
  const long long first_token = static_cast<long long>(blockIdx.x) * TOKENS;
  // Each token's slot (-1: no token, or nothing to write) and rotation. The items are loaded for
  // every token of the block, before the slots have arrived.
  const int live = tokens - first_token < TOKENS ? static_cast<int>(tokens - first_token) : TOKENS;
  long long slot[TOKENS];
  bool rotate[TOKENS];
  const T *cos[TOKENS];
#pragma unroll
  for (int t = 0; t < TOKENS; ++t) {
    const long long token = first_token + t;
    slot[t] = t < live ? slot_mapping[token] : -1;
    if (slot[t] >= slots)
      slot[t] = -1;
    rotate[t] = false;
    cos[t] = cos_sin_cache;
    if (ROPE != 0 && t < live) {
      const long long position = positions[token];
      rotate[t] = position >= 0 && position < max_position;
      cos[t] = cos_sin_cache + (rotate[t] ? position : 0) * ROTARY_DIM;
    }
  }
  const int key_items = kv_heads * KEY_ITEMS;
  const int items = key_items + kv_heads * VALUE_ITEMS;
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    // The item's two pieces in the row of kv heads, at at[0] and at[1]; the same for every token.
    const bool is_value = item >= key_items;
    const int head = item / KEY_ITEMS, index = item % KEY_ITEMS;
    const int first = index * VEC; // a rotated pack's first pair
    const bool rotated = !is_value && index < PAIR_ITEMS;
    // An unrotated item's pieces lie half the span it walks apart (the row of kv heads, or a head's
    // part past the rotation), so that a warp's loads and stores of either piece are contiguous.
    const int half_row = kv_heads * HEAD_DIM / 2;
    int at[2];
    if (is_value || ROTATED == 0) {
      at[0] = (is_value ? item - key_items : item) * VEC; // heads are contiguous
      at[1] = at[0] + half_row;
    } else if (!rotated) {
      at[0] = head * HEAD_DIM + ROTATED + (index - PAIR_ITEMS) * VEC;
      at[1] = at[0] + (HEAD_DIM - ROTATED) / 2;
    } else if (ROPE == 1) {
      at[0] = head * HEAD_DIM + first;
      at[1] = at[0] + ROTATED / 2;
    } else {
      at[0] = head * HEAD_DIM + 2 * first; // GPT-J's pairs interleaved: VEC elements, VEC more
      at[1] = at[0] + VEC;
    }
    // The pieces as loaded (raw, so that a plain copy holds 16 bytes of registers per piece, not 8
    // floats), and for a rotated pack the cosines and sines: loaded whether or not the token
    // rotates (an unrotated one reads row 0), so that no load waits for the positions before it
    // goes out.
    kjit::Vec<T, VEC> raw[TOKENS][2], angle[TOKENS][2];
#pragma unroll
    for (int t = 0; t < TOKENS; ++t) {
      if (t >= live)
        continue;
      const long long token = first_token + t;
      const T *from = is_value ? value + token * value_stride : key + token * key_stride;
      raw[t][0] = kjit::load_vec<VEC>(from + at[0]);
      raw[t][1] = kjit::load_vec<VEC>(from + at[1]);
      if (rotated) {
        angle[t][0] = kjit::load_vec<VEC>(cos[t] + first);
        angle[t][1] = kjit::load_vec<VEC>(cos[t] + ROTATED / 2 + first);
      }
    }
    const float inverse_scale = is_value ? v_inverse_scale : k_inverse_scale;
#pragma unroll
    for (int t = 0; t < TOKENS; ++t) {
      if (slot[t] < 0)
        continue;
      C *row = static_cast<C *>(is_value ? v_cache_bytes : k_cache_bytes) +
               slot[t] * kv_heads * HEAD_DIM;
      if (!rotated) {
#pragma unroll
        for (int piece = 0; piece < 2; ++piece) {
          if (KV_FP8) {
            float f[VEC];
            kjit::to_floats(raw[t][piece], f);
            store<T, KV_FP8>(row + at[piece], f, inverse_scale);
          } else {
            kjit::store_vec(reinterpret_cast<T *>(row) + at[piece], raw[t][piece]);
          }
        }
        continue;
      }
      // VEC pairs from `first`: x and y as rotary.hip pairs them.
      float a[VEC], b[VEC], x[VEC], y[VEC];
      kjit::to_floats(raw[t][0], a);
      kjit::to_floats(raw[t][1], b);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        x[e] = ROPE == 1 ? a[e] : 2 * e < VEC ? a[2 * e] : b[2 * e - VEC];
        y[e] = ROPE == 1 ? b[e] : 2 * e + 1 < VEC ? a[2 * e + 1] : b[2 * e + 1 - VEC];
      }
      if (rotate[t]) {
        float c[VEC], sn[VEC];
        kjit::to_floats(angle[t][0], c);
        kjit::to_floats(angle[t][1], sn);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          const float p = x[e], q = y[e];
          x[e] = p * c[e] - q * sn[e];
          y[e] = q * c[e] + p * sn[e];
        }
      }
      // Back in the loaded order: x then y (NeoX), or interleaved again (GPT-J).
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        if (ROPE == 1) {
          a[e] = x[e];
          b[e] = y[e];
        } else {
          (2 * e < VEC ? a[2 * e] : b[2 * e - VEC]) = x[e];
          (2 * e + 1 < VEC ? a[2 * e + 1] : b[2 * e + 1 - VEC]) = y[e];
        }
      }
      store<T, KV_FP8>(row + at[0], a, inverse_scale);
      store<T, KV_FP8>(row + at[1], b, inverse_scale);
    }
  }
}

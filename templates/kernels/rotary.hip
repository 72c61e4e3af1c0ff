// Rotary position embedding applied in place to query and key (vLLM's rotary_embedding).
// query is [tokens, q_heads * HEAD_SIZE], key [tokens, kv_heads * HEAD_SIZE], both contiguous;
// cos_sin_cache is [max_position, ROTARY_DIM]: ROTARY_DIM / 2 cosines, then as many sines. The
// first ROTARY_DIM elements of every head are rotated, the rest are left as they are. Pair i
// (i < ROTARY_DIM / 2) is (x[i], x[i + ROTARY_DIM / 2]) in the NeoX style, (x[2i], x[2i + 1]) in
// the GPT-J style; both rotate by the angle whose cosine and sine are cache[pos][i] and
// cache[pos][ROTARY_DIM / 2 + i]:  x' = x cos - y sin,  y' = y cos + x sin.
//
// One block per token; each thread rotates VEC pairs at a time with packed loads (the host picks
// VEC so that every access is aligned; VEC 1 needs no more than T's own alignment). Positions
// outside [0, max_position) leave their token unrotated rather than read outside the cache.

namespace kjit_rotary {

template <typename T, int VEC>
__device__ inline void rotate(kjit::Vec<T, VEC> &x, kjit::Vec<T, VEC> &y,
                              const kjit::Vec<T, VEC> &cos, const kjit::Vec<T, VEC> &sin) {
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    const float a = kjit::to_float(x.at[k]), b = kjit::to_float(y.at[k]);
    const float c = kjit::to_float(cos.at[k]), s = kjit::to_float(sin.at[k]);
    x.at[k] = kjit::from_float<T>(a * c - b * s);
    y.at[k] = kjit::from_float<T>(b * c + a * s);
  }
}

// Rotates pairs [first, first + VEC) of one head.
template <typename T, int ROTARY_DIM, int NEOX, int VEC>
__device__ inline void rotate_head(T *head, const T *cos, const T *sin, int first) {
  const kjit::Vec<T, VEC> c = kjit::load_vec<VEC>(cos + first);
  const kjit::Vec<T, VEC> s = kjit::load_vec<VEC>(sin + first);
  if (NEOX) {
    kjit::Vec<T, VEC> x = kjit::load_vec<VEC>(head + first);
    kjit::Vec<T, VEC> y = kjit::load_vec<VEC>(head + ROTARY_DIM / 2 + first);
    rotate(x, y, c, s);
    kjit::store_vec(head + first, x);
    kjit::store_vec(head + ROTARY_DIM / 2 + first, y);
  } else {
    // Adjacent pairs: one packed access of 2 * VEC elements, or element by element for VEC 1 (a
    // pair need not be aligned as a whole: the host falls back to VEC 1 where it is not).
    T *pairs = head + 2 * first;
    kjit::Vec<T, 2 * VEC> both;
    if (VEC == 1) {
      both.at[0] = pairs[0];
      both.at[1] = pairs[1];
    } else {
      both = kjit::load_vec<2 * VEC>(pairs);
    }
    kjit::Vec<T, VEC> x, y;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      x.at[k] = both.at[2 * k];
      y.at[k] = both.at[2 * k + 1];
    }
    rotate(x, y, c, s);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      both.at[2 * k] = x.at[k];
      both.at[2 * k + 1] = y.at[k];
    }
    if (VEC == 1) {
      pairs[0] = both.at[0];
      pairs[1] = both.at[1];
    } else {
      kjit::store_vec(pairs, both);
    }
  }
}

} // namespace kjit_rotary

template <typename T, int HEAD_SIZE, int ROTARY_DIM, int NEOX, int VEC>
__global__ void rotary_embedding(const long long *KJIT_RESTRICT positions, T *KJIT_RESTRICT query,
                                 T *KJIT_RESTRICT key, const T *KJIT_RESTRICT cos_sin_cache,
                                 int max_position, int q_heads, int kv_heads) {
  static_assert(ROTARY_DIM % 2 == 0 && ROTARY_DIM <= HEAD_SIZE, "ROTARY_DIM: even, <= HEAD_SIZE");
  static_assert((ROTARY_DIM / 2) % VEC == 0, "VEC must divide ROTARY_DIM / 2");
  constexpr int GROUPS = ROTARY_DIM / 2 / VEC; // packs of VEC pairs per head
  const int token = blockIdx.x;
  const long long position = positions[token];
  if (position < 0 || position >= max_position)
    return;
  const T *cos = cos_sin_cache + position * ROTARY_DIM;
  const T *sin = cos + ROTARY_DIM / 2;
  T *token_query = query + static_cast<long long>(token) * q_heads * HEAD_SIZE;
  T *token_key = key + static_cast<long long>(token) * kv_heads * HEAD_SIZE;
  const int query_items = q_heads * GROUPS;
  const int items = (q_heads + kv_heads) * GROUPS;
  for (int item = threadIdx.x; item < items; item += blockDim.x) {
    const bool is_query = item < query_items;
    const int index = is_query ? item : item - query_items;
    T *head = (is_query ? token_query : token_key) + (index / GROUPS) * HEAD_SIZE;
    kjit_rotary::rotate_head<T, ROTARY_DIM, NEOX, VEC>(head, cos, sin, (index % GROUPS) * VEC);
  }
}

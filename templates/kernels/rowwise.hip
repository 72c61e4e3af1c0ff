// Row-wise operators over rows of HIDDEN elements, computed in float whatever T is: the norms and
// the softmax.
//
//   rms_norm<T, HIDDEN, VEC, THREADS>(out, x, w, eps, rows)
//       out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * w[i]
//   fused_add_rms_norm<T, HIDDEN, VEC, THREADS>(x, residual, w, eps, rows)    (vLLM's)
//       residual[r, i] = x[r, i] + residual[r, i], rounded to T, then
//       x[r, i] = rms_norm of that new residual row
//   layer_norm<T, HIDDEN, VEC, THREADS>(out, x, w, b, eps, rows)
//       out[r, i] = (x[r, i] - mean) / sqrt(variance + eps) * w[i] + b[i]   (biased variance)
//   softmax<T, COLS, VEC, THREADS>(out, x, scale, rows, causal_queries)     (COLS as HIDDEN)
//       out[r, i] = exp(scale * x[r, i] - m) / sum_j exp(scale * x[r, j] - m), m the row's
//       maximum; with causal_queries = q > 0 the rows form matrices of q query rows over COLS
//       keys, the last query seeing the last key: row r masks columns i > r % q + COLS - q.
//       A row whose every column is masked is all zeros.
//
// The block is THREADS x blockDim.y threads and handles blockDim.y rows, THREADS threads per
// row (kjit::row_reduce: several rows per block only when THREADS <= the warp size). Each thread
// keeps its PER vectors of VEC elements of the row in registers between the reduction and the
// write, so each element is read once and written once. HIDDEN is a compile-time constant: the
// loops unroll and the array has a fixed size. The host picks VEC dividing HIDDEN with every
// pointer aligned to VEC * sizeof(T). `out` may be `x` (each thread writes only what it read).

// The block holds THREADS threads, or 256 when a row takes a warp or less: bounding it lets
// the compiler keep to the registers such a block may have (64 per thread at 1024 threads),
// where unbounded it may take more and the launch would fail.
#define KJIT_ROW_BOUNDS __launch_bounds__(THREADS > 256 ? THREADS : 256)

namespace kjit_rowwise {

template <typename T, int HIDDEN, int VEC, int THREADS> struct Row {
  static_assert(HIDDEN % VEC == 0, "VEC divides HIDDEN");
  static constexpr int VECTORS = HIDDEN / VEC;
  static constexpr int PER = (VECTORS + THREADS - 1) / THREADS;
  static_assert(PER * VEC <= 64, "a thread holds at most 64 elements: raise THREADS");

  // The row this thread works on, and whether it exists (threads past the last row still take
  // part in the reductions, which every thread of a warp must join).
  static __device__ long long index() {
    return static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
  }
  // Whether vector k of this thread lies inside the row: a constant for all but the last k when
  // THREADS divides VECTORS.
  static __device__ bool holds(int k) {
    return k * THREADS + static_cast<int>(threadIdx.x) < VECTORS;
  }
  static __device__ int offset(int k) {
    return (k * THREADS + static_cast<int>(threadIdx.x)) * VEC;
  }

  float v[PER][VEC];

  // Loads the row starting at `p` (zeros where this thread holds nothing).
  __device__ void load(const T *p, bool active) {
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      if (active && holds(k)) {
        kjit::to_floats(kjit::load_vec<VEC>(p + offset(k)), v[k]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          v[k][e] = 0.0f;
      }
    }
  }

  __device__ float sum() const {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k)
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        s += v[k][e];
    return kjit::row_sum<THREADS>(s);
  }
  // Sum of (v - shift)^2 over the elements the row holds (not the zeros past its end).
  __device__ float sum_of_squares(float shift) const {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
      if (!holds(k))
        continue;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float d = v[k][e] - shift;
        s += d * d;
      }
    }
    return kjit::row_sum<THREADS>(s);
  }
};

} // namespace kjit_rowwise

template <typename T, int HIDDEN, int VEC, int THREADS>
__global__ void KJIT_ROW_BOUNDS rms_norm(T *out, const T *x, const T *KJIT_RESTRICT w, float eps,
                                         int rows) {
  using Row = kjit_rowwise::Row<T, HIDDEN, VEC, THREADS>;
  const long long row = Row::index();
  const bool active = row < rows;
  Row r;
  r.load(x + row * HIDDEN, active);
  const float scale = rsqrtf(r.sum_of_squares(0.0f) / HIDDEN + eps);
  if (!active)
    return;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k) {
    if (!Row::holds(k))
      continue;
    const kjit::Vec<T, VEC> weight = kjit::load_vec<VEC>(w + Row::offset(k));
    kjit::Vec<T, VEC> result;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      result.at[e] = kjit::from_float<T>(r.v[k][e] * scale * kjit::to_float(weight.at[e]));
    kjit::store_vec<VEC>(out + row * HIDDEN + Row::offset(k), result);
  }
}

template <typename T, int HIDDEN, int VEC, int THREADS>
__global__ void KJIT_ROW_BOUNDS fused_add_rms_norm(T *x, T *residual, const T *KJIT_RESTRICT w,
                                                   float eps, int rows) {
  using Row = kjit_rowwise::Row<T, HIDDEN, VEC, THREADS>;
  const long long row = Row::index();
  const bool active = row < rows;
  T *x_row = x + row * HIDDEN;
  T *residual_row = residual + row * HIDDEN;
  Row r;
  r.load(x_row, active);
  // The new residual, rounded to T as it is stored: the norm is that of the stored residual.
  // Every load is issued before the first store.
#pragma unroll
  for (int k = 0; k < Row::PER; ++k) {
    if (!active || !Row::holds(k))
      continue;
    const kjit::Vec<T, VEC> old = kjit::load_vec<VEC>(residual_row + Row::offset(k));
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      r.v[k][e] = kjit::to_float(kjit::from_float<T>(r.v[k][e] + kjit::to_float(old.at[e])));
  }
#pragma unroll
  for (int k = 0; k < Row::PER; ++k) {
    if (!active || !Row::holds(k))
      continue;
    kjit::Vec<T, VEC> sum;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      sum.at[e] = kjit::from_float<T>(r.v[k][e]); // exact: r.v holds T values
    kjit::store_vec<VEC>(residual_row + Row::offset(k), sum);
  }
  const float scale = rsqrtf(r.sum_of_squares(0.0f) / HIDDEN + eps);
  if (!active)
    return;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k) {
    if (!Row::holds(k))
      continue;
    const kjit::Vec<T, VEC> weight = kjit::load_vec<VEC>(w + Row::offset(k));
    kjit::Vec<T, VEC> result;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      result.at[e] = kjit::from_float<T>(r.v[k][e] * scale * kjit::to_float(weight.at[e]));
    kjit::store_vec<VEC>(x_row + Row::offset(k), result);
  }
}

template <typename T, int HIDDEN, int VEC, int THREADS>
__global__ void KJIT_ROW_BOUNDS layer_norm(T *out, const T *x, const T *KJIT_RESTRICT w,
                                           const T *KJIT_RESTRICT b, float eps, int rows) {
  using Row = kjit_rowwise::Row<T, HIDDEN, VEC, THREADS>;
  const long long row = Row::index();
  const bool active = row < rows;
  Row r;
  r.load(x + row * HIDDEN, active);
  // Two passes over the registers: the variance of the centred values does not lose the digits
  // that E[x^2] - mean^2 cancels away.
  const float mean = r.sum() / HIDDEN;
  const float scale = rsqrtf(r.sum_of_squares(mean) / HIDDEN + eps);
  if (!active)
    return;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k) {
    if (!Row::holds(k))
      continue;
    const kjit::Vec<T, VEC> weight = kjit::load_vec<VEC>(w + Row::offset(k));
    const kjit::Vec<T, VEC> bias = kjit::load_vec<VEC>(b + Row::offset(k));
    kjit::Vec<T, VEC> result;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      result.at[e] = kjit::from_float<T>((r.v[k][e] - mean) * scale * kjit::to_float(weight.at[e]) +
                                         kjit::to_float(bias.at[e]));
    kjit::store_vec<VEC>(out + row * HIDDEN + Row::offset(k), result);
  }
}

template <typename T, int COLS, int VEC, int THREADS>
__global__ void KJIT_ROW_BOUNDS softmax(T *out, const T *x, float scale, int rows,
                                        int causal_queries) {
  using Row = kjit_rowwise::Row<T, COLS, VEC, THREADS>;
  const long long row = Row::index();
  const bool active = row < rows;
  const float minus_infinity = -__int_as_float(0x7f800000);
  Row r;
  r.load(x + row * COLS, active);
  // In base 2: exp(scale x - m) = 2^(scale log2(e) x - m'), one multiply per element before the
  // maximum and one subtraction before the hardware's exp2. Columns past the row's end and
  // masked ones become -inf, which the maximum ignores and exp2 turns into 0.
  const float scale2 = scale * 1.4426950408889634f;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      r.v[k][e] = Row::holds(k) ? r.v[k][e] * scale2 : minus_infinity;
  if (causal_queries > 0) { // the same for the whole launch: no divergence
    // An active row is below rows, an int: the remainder in 32 bits, not 64-bit software division.
    const int last_visible =
        active ? static_cast<int>(row) % causal_queries + COLS - causal_queries : COLS - 1;
#pragma unroll
    for (int k = 0; k < Row::PER; ++k)
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        if (Row::offset(k) + e > last_visible)
          r.v[k][e] = minus_infinity;
  }
  float maximum = minus_infinity;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      maximum = fmaxf(maximum, r.v[k][e]);
  maximum = kjit::row_max<THREADS>(maximum);
  // A row whose every column is masked has maximum -inf: subtracting 0 instead keeps every
  // exp2(-inf) at 0 (not NaN), so the row sums to 0 and is written as zeros.
  const float shift = maximum == minus_infinity ? 0.0f : maximum;
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      r.v[k][e] = exp2f(r.v[k][e] - shift);
      total += r.v[k][e];
    }
  total = kjit::row_sum<THREADS>(total);
  const float reciprocal = total > 0.0f ? 1.0f / total : 0.0f;
  if (!active)
    return;
#pragma unroll
  for (int k = 0; k < Row::PER; ++k) {
    if (!Row::holds(k))
      continue;
    kjit::Vec<T, VEC> result;
#pragma unroll
    for (int e = 0; e < VEC; ++e)
      result.at[e] = kjit::from_float<T>(r.v[k][e] * reciprocal);
    kjit::store_vec<VEC>(out + row * COLS + Row::offset(k), result);
  }
}

// Dynamic per-token (per-row) quantisation: each row of input [rows, HIDDEN] is scaled by its own
// scale = max|x| / QMAX, written to scales[row], and out = round(x / scale) saturated to the
// output type's range, computed as x * (1 / scale) in float (within one unit of it). A row of
// zeros gets scale 0 and all-zero output (no division by zero). int8: QMAX 127, round to nearest
// even. fp8 e4m3 (template dynamic_per_token_quant_fp8, compiled with KJIT_QUANT_FP8): QMAX 448,
// cuda_fp8.h's conversion (nearest even, saturating to +-448); NVIDIA only: hiprtc has no fp8.
//
// One block of THREADS threads per row, VEC elements per packed load (the host picks VEC so that
// every access is aligned). The row stays in registers between the max and the quantisation, so
// memory is read once and written once.

#if defined(KJIT_QUANT_FP8)
#if KJIT_HIP
#error "kjit quant_fp8: fp8 e4m3 needs an NVIDIA target (sm_89 or newer); hiprtc has no fp8 type"
#else
#include <cuda_fp8.h>
#endif
#endif

namespace kjit_quant {

// The row's share of this thread: packs threadIdx.x, threadIdx.x + THREADS, ... of the row.
template <typename T, int HIDDEN, int VEC, int THREADS> struct RowSlice {
  static constexpr int PACKS = HIDDEN / VEC;
  static constexpr int ITEMS = (PACKS + THREADS - 1) / THREADS;
  kjit::Vec<T, VEC> packs[ITEMS];

  __device__ static bool owns(int item) { return item * THREADS + int(threadIdx.x) < PACKS; }
  __device__ static int offset(int item) { return (item * THREADS + int(threadIdx.x)) * VEC; }

  // Loads the slice and returns the row's max |x| (every thread of the block gets it).
  __device__ float load_absmax(const T *row) {
    float absmax = 0.0f;
#pragma unroll
    for (int item = 0; item < ITEMS; ++item) {
      if (!owns(item))
        continue;
      packs[item] = kjit::load_vec<VEC>(row + offset(item));
#pragma unroll
      for (int k = 0; k < VEC; ++k)
        absmax = fmaxf(absmax, fabsf(kjit::to_float(packs[item].at[k])));
    }
    return kjit::block_max(absmax);
  }

  // Stores quantise(x) for the slice, VEC output elements per packed store.
  template <typename Q, typename Quantise> __device__ void store(Q *row, Quantise quantise) const {
#pragma unroll
    for (int item = 0; item < ITEMS; ++item) {
      if (!owns(item))
        continue;
      kjit::Vec<Q, VEC> out;
#pragma unroll
      for (int k = 0; k < VEC; ++k)
        out.at[k] = quantise(kjit::to_float(packs[item].at[k]));
      kjit::store_vec(row + offset(item), out);
    }
  }
};

struct ToInt8 {
  __device__ signed char operator()(float q) const {
    const int rounded = __float2int_rn(q); // to nearest even
    return static_cast<signed char>(rounded < -128 ? -128 : rounded > 127 ? 127 : rounded);
  }
};

#if defined(KJIT_QUANT_FP8)
struct ToFp8E4m3 {
  __device__ unsigned char operator()(float q) const {
    return static_cast<unsigned char>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  }
};
#endif

template <typename T, int HIDDEN, int VEC, int THREADS, typename Q, typename Quantise>
__device__ inline void quantise_row(Q *out, float *scales, const T *input, float qmax) {
  static_assert(HIDDEN % VEC == 0, "VEC must divide HIDDEN");
  const long long row = blockIdx.x;
  RowSlice<T, HIDDEN, VEC, THREADS> slice;
  const float absmax = slice.load_absmax(input + row * HIDDEN);
  const float scale = absmax / qmax;
  if (threadIdx.x == 0)
    scales[row] = scale;
  // x / scale as x * (1 / scale), as vLLM does: a division per element costs more than a 16-bit
  // element's memory traffic, and the product is within a unit in the last place of the
  // quotient. Below 2^-126 the reciprocal of the scale would overflow, so such rows are scaled
  // up by 2^64 first (exactly: |x| <= 448 * 2^-126 there). A row of zeros (scale 0) gets zeros.
  const float pre = scale >= 0x1p-126f ? 1.0f : 0x1p64f;
  const float inverse = scale > 0.0f ? 1.0f / (scale * pre) : 0.0f;
  const Quantise quantise{};
  slice.store(out + row * HIDDEN, [=](float x) { return quantise(x * pre * inverse); });
}

} // namespace kjit_quant

template <typename T, int HIDDEN, int VEC, int THREADS>
__global__ void __launch_bounds__(THREADS)
    dynamic_per_token_quant_int8(signed char *KJIT_RESTRICT out, float *KJIT_RESTRICT scales,
                                 const T *KJIT_RESTRICT input) {
  kjit_quant::quantise_row<T, HIDDEN, VEC, THREADS, signed char, kjit_quant::ToInt8>(out, scales,
                                                                                     input, 127.0f);
}

#if defined(KJIT_QUANT_FP8)
template <typename T, int HIDDEN, int VEC, int THREADS>
__global__ void __launch_bounds__(THREADS)
    dynamic_per_token_quant_fp8(unsigned char *KJIT_RESTRICT out, float *KJIT_RESTRICT scales,
                                const T *KJIT_RESTRICT input) {
  kjit_quant::quantise_row<T, HIDDEN, VEC, THREADS, unsigned char, kjit_quant::ToFp8E4m3>(
      out, scales, input, 448.0f);
}
#endif

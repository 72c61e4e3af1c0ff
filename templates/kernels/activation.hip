// Activations, element-wise and gated, computed in float whatever T is.
//
//   activation<ACT, T, VEC>(out, x, n):        out[i] = ACT(x[i]) for i < n
//   gated_activation<ACT, T, VEC>(out, x, d, vectors):
//                                              x is [rows, 2 * d], out is [rows, d] (vectors is
//                                              rows * d / VEC): out[r, i] = ACT(x[r, i]) *
//                                              x[r, d + i] (vLLM's silu_and_mul, gelu_and_mul)
//
// Both are memory-bound: each input element is read once and each output written once, VEC
// elements per access (16 bytes at VEC = 16 / sizeof(T)). The host picks VEC so that every vector
// access is aligned: the pointers are aligned to VEC * sizeof(T) and, for the gated form, d is a
// multiple of VEC. Each thread first issues UNROLL independent loads, then computes and stores,
// so that enough bytes are in flight to cover the memory latency. Both launch blocks of 256
// threads, each thread taking UNROLL vectors of the flat output.

// Each activation in two precisions: FAST for 16-bit outputs, where the hardware's approximate
// exponential and division (relative error about 2^-21, far below half's 2^-11) keep the kernel
// memory-bound; IEEE division and tanhf otherwise, so that float outputs stay within a few ulp.
// Approximate division by a huge denominator gives 0 where the true quotient underflows anyway.
template <bool FAST> __device__ inline float divide(float a, float b) {
  if (FAST)
    return a * kjit::fast_reciprocal(b);
  return a / b;
}

struct silu {
  template <bool FAST> __device__ static float apply(float x) {
    return divide<FAST>(x, 1.0f + kjit::fast_exp(-x));
  }
};
struct sigmoid {
  template <bool FAST> __device__ static float apply(float x) {
    return divide<FAST>(1.0f, 1.0f + kjit::fast_exp(-x));
  }
};
// x * Phi(x), Phi the standard normal distribution function. The FAST form takes the upper tail
// Q(|x|) = erfc(z) / 2, z = |x| / sqrt(2), as t e^(-z^2) P(t) with t = 1 / (1 + 0.46 z) and P of
// degree 5, fitted (weighted least squares on the relative error, over all of z >= 0) to
// erfc(z) e^(z^2) / (2 t): relative error below 2e-5 (2^-15.6) for every x whose result is a
// normal float, so tiny negative results stay accurate; 16-bit outputs need 2^-12. Then
// Phi = 1 - Q or Q: no branch, where erff's two ranges diverge within a warp. Half the
// multiply-adds of a float-accurate erfc keeps the 16-bit kernels memory-bound.
struct gelu {
  template <bool FAST> __device__ static float apply(float x) {
    if (!FAST)
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    // 0.46 z = 0.325269119 |x| and e^(-z^2) = 2^(x (x -log2(e) / 2)): z is never formed.
    // fast_exp2 may flush results below 2^-126 to zero, where gelu's is below float's normal range.
    const float t = kjit::fast_reciprocal(1.0f + 0.325269119f * fabsf(x));
    // P's coefficients, highest power first.
    const float c[] = {-0.063174141f, 0.120896498f, 0.0627287295f,
                       0.120260976f,  0.129517278f, 0.129765857f};
    float p = c[0];
#pragma unroll
    for (int i = 1; i < 6; ++i)
      p = p * t + c[i];
    const float upper = t * kjit::fast_exp2(x * (x * -0.72134752f)) * p; // Q(|x|)
    return x * (x < 0.0f ? upper : 1.0f - upper);
  }
};
// The tanh approximation of gelu (torch's approximate="tanh"): 0.5 x (1 + tanh(u)), which is
// x / (1 + e^(-2u)) exactly, without tanh's cost or its cancellation near u = 0 in the FAST form.
struct gelu_tanh {
  template <bool FAST> __device__ static float apply(float x) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    if (FAST)
      return divide<true>(x, 1.0f + kjit::fast_exp(-2.0f * inner));
    return 0.5f * x * (1.0f + tanhf(inner));
  }
};
// NaN stays NaN, as in torch.relu.
struct relu {
  template <bool FAST> __device__ static float apply(float x) { return x < 0.0f ? 0.0f : x; }
};

namespace kjit_activation {
// Vectors per thread, all loaded before the first is used. On an H200, four and eight took more
// registers for no more bandwidth than two.
constexpr int UNROLL = 2;
// The FAST forms for 16-bit element types (see above).
template <typename ACT, typename T> __device__ inline float apply(float x) {
  return ACT::template apply<(sizeof(T) < 4)>(x);
}
// v = ACT(v), or ACT(v) * gate, element by element, in float.
template <typename ACT, typename T, int VEC> __device__ inline void activate(kjit::Vec<T, VEC> &v) {
  float f[VEC];
  kjit::to_floats(v, f);
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    f[e] = apply<ACT, T>(f[e]);
  kjit::from_floats(f, v);
}
template <typename ACT, typename T, int VEC>
__device__ inline void activate_gated(kjit::Vec<T, VEC> &v, const kjit::Vec<T, VEC> &gate) {
  float f[VEC], g[VEC];
  kjit::to_floats(v, f);
  kjit::to_floats(gate, g);
#pragma unroll
  for (int e = 0; e < VEC; ++e)
    f[e] = apply<ACT, T>(f[e]) * g[e];
  kjit::from_floats(f, v);
}
} // namespace kjit_activation

template <typename ACT, typename T, int VEC>
__global__ void __launch_bounds__(256) activation(T *out, const T *x, long long n) {
  using kjit_activation::UNROLL;
  const long long vectors = n / VEC;
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x * UNROLL + threadIdx.x;
  kjit::Vec<T, VEC> v[UNROLL];
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    const long long i = first + static_cast<long long>(k) * blockDim.x;
    if (i < vectors)
      v[k] = kjit::load_vec<VEC>(x + i * VEC);
  }
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    const long long i = first + static_cast<long long>(k) * blockDim.x;
    if (i < vectors) {
      kjit_activation::activate<ACT>(v[k]);
      kjit::store_vec<VEC>(out + i * VEC, v[k]);
    }
  }
  // The last n % VEC elements, one per thread of the first block.
  if (VEC > 1 && blockIdx.x == 0 && threadIdx.x < n - vectors * VEC) {
    const long long i = vectors * VEC + threadIdx.x;
    out[i] = kjit::from_float<T>(kjit_activation::apply<ACT, T>(kjit::to_float(x[i])));
  }
}

// The same launch as `activation`, over the output's vectors, whatever the row length: one block
// per row left short rows (d of 4096 and less) to blocks of 128 threads that ran at 72-88% of the
// copy bandwidth in 16 bits, against 94-100% this way. vectors = rows * d / VEC < 2^31 - 2^16:
// the host splits larger tensors into launches of whole rows.
template <typename ACT, typename T, int VEC>
__global__ void __launch_bounds__(256) gated_activation(T *out, const T *x, int d, int vectors) {
  using kjit_activation::UNROLL;
  const int per_row = d / VEC;
  const int first = static_cast<int>(blockIdx.x * blockDim.x) * UNROLL + threadIdx.x;
  kjit::Vec<T, VEC> a[UNROLL], b[UNROLL];
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    const int i = first + k * static_cast<int>(blockDim.x);
    if (i < vectors) {
      // Output vector i is vector i % per_row of row i / per_row, whose input row is 2 * d long.
      const long long row = i / per_row;
      const T *at = x + (i + row * per_row) * VEC;
      a[k] = kjit::load_vec<VEC>(at);
      b[k] = kjit::load_vec<VEC>(at + d);
    }
  }
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    const int i = first + k * static_cast<int>(blockDim.x);
    if (i < vectors) {
      kjit_activation::activate_gated<ACT>(a[k], b[k]);
      kjit::store_vec<VEC>(out + static_cast<long long>(i) * VEC, a[k]);
    }
  }
}

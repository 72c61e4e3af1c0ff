// Activations, element-wise and gated, computed in float whatever T is.
//
//   activation<ACT, T, VEC>(out, x, n):        out[i] = ACT(x[i]) for i < n
//   gated_activation<ACT, T, VEC>(out, x, d):  x is [rows, 2 * d], out is [rows, d], one block
//                                              per row: out[r, i] = ACT(x[r, i]) * x[r, d + i]
//                                              (vLLM's silu_and_mul, gelu_and_mul)
//
// Both are memory-bound: each input element is read once and each output written once, VEC
// elements per access (16 bytes at VEC = 16 / sizeof(T)). The host picks VEC so that every vector
// access is aligned: the pointers are aligned to VEC * sizeof(T) and, for the gated form, d is a
// multiple of VEC. Each thread first issues UNROLL independent loads, then computes and stores,
// so that enough bytes are in flight to cover the memory latency. Blocks have at most 256
// threads (the bound keeps the compiler to the registers that allows).

// Each activation in two precisions: FAST for 16-bit outputs, where the hardware's approximate
// exponential and division (relative error about 2^-21, far below half's 2^-11) keep the kernel
// memory-bound; IEEE division and tanhf otherwise, so that float outputs stay within a few ulp.
// Approximate division by a huge denominator gives 0 where the true quotient underflows anyway.
template <bool FAST> __device__ inline float divide(float a, float b) {
  if (FAST)
    return __fdividef(a, b);
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
    // exp2f is the hardware's base-2 exponential on both vendors (2 ulp, ex2.approx on NVIDIA).
    const float t = __fdividef(1.0f, 1.0f + 0.325269119f * fabsf(x));
    // P's coefficients, highest power first.
    const float c[] = {-0.063174141f, 0.120896498f, 0.0627287295f,
                       0.120260976f,  0.129517278f, 0.129765857f};
    float p = c[0];
#pragma unroll
    for (int i = 1; i < 6; ++i)
      p = p * t + c[i];
    const float upper = t * exp2f(x * (x * -0.72134752f)) * p; // Q(|x|)
    return x * (x < 0.0f ? upper : 1.0f - upper);
  }
};
// The tanh approximation of gelu (torch's approximate="tanh"): 0.5 x (1 + tanh(u)), which is
// x / (1 + e^(-2u)) exactly, without tanh's cost or its cancellation near u = 0 in the FAST form.
struct gelu_tanh {
  template <bool FAST> __device__ static float apply(float x) {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    if (FAST)
      return __fdividef(x, 1.0f + kjit::fast_exp(-2.0f * inner));
    return 0.5f * x * (1.0f + tanhf(inner));
  }
};
// NaN stays NaN, as in torch.relu.
struct relu {
  template <bool FAST> __device__ static float apply(float x) { return x < 0.0f ? 0.0f : x; }
};

namespace kjit_activation {
constexpr int UNROLL = 4;
// The FAST forms for 16-bit element types (see above).
template <typename ACT, typename T> __device__ inline float apply(float x) {
  return ACT::template apply<(sizeof(T) < 4)>(x);
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
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        v[k].at[e] =
            kjit::from_float<T>(kjit_activation::apply<ACT, T>(kjit::to_float(v[k].at[e])));
      kjit::store_vec<VEC>(out + i * VEC, v[k]);
    }
  }
  // The last n % VEC elements, one per thread of the first block.
  if (VEC > 1 && blockIdx.x == 0 && threadIdx.x < n - vectors * VEC) {
    const long long i = vectors * VEC + threadIdx.x;
    out[i] = kjit::from_float<T>(kjit_activation::apply<ACT, T>(kjit::to_float(x[i])));
  }
}

template <typename ACT, typename T, int VEC>
__global__ void __launch_bounds__(256) gated_activation(T *out, const T *x, int d) {
  using kjit_activation::UNROLL;
  const int vectors = d / VEC;
  const T *a = x + static_cast<long long>(blockIdx.x) * 2 * d;
  const T *b = a + d;
  T *y = out + static_cast<long long>(blockIdx.x) * d;
  for (int base = 0; base < vectors; base += blockDim.x * UNROLL) {
    kjit::Vec<T, VEC> va[UNROLL], vb[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const int j = base + k * blockDim.x + threadIdx.x;
      if (j < vectors) {
        va[k] = kjit::load_vec<VEC>(a + j * VEC);
        vb[k] = kjit::load_vec<VEC>(b + j * VEC);
      }
    }
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {
      const int j = base + k * blockDim.x + threadIdx.x;
      if (j < vectors) {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          va[k].at[e] =
              kjit::from_float<T>(kjit_activation::apply<ACT, T>(kjit::to_float(va[k].at[e])) *
                                  kjit::to_float(vb[k].at[e]));
        kjit::store_vec<VEC>(y + j * VEC, va[k]);
      }
    }
  }
}

// The 16-bit activation kernels of templates/kernels/activation.hip on a CUDA GPU, next to the
// forms they replaced (issue 4: 90% of the device-to-device copy): the gelu before the
// flush-to-zero exponential and reciprocal (gelu_exp2), and the gated kernel with its pair
// conversions written out by hand (packed). Times are CUDA events over 50 launches, best of 5;
// BENCHMARKS.md has the results. Built from the template sources themselves, with nvcc:
//
//   nvcc -O3 -std=c++20 -arch=sm_90a -I templates/prelude bench/experiments/activations.cu \
//     -o build/exp/act && build/exp/act
#define KJIT_WARP_SIZE 32
#include "kjit/prelude.h" // as kjit pre-includes it

#include "../../templates/kernels/activation.hip"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

// The template's gelu before: exp2f and __fdividef, which CUDA compiles without flushing.
struct gelu_exp2 {
  template <bool FAST> __device__ static float apply(float x) {
    const float t = __fdividef(1.0f, 1.0f + 0.325269119f * fabsf(x));
    const float c[] = {-0.063174141f, 0.120896498f, 0.0627287295f,
                       0.120260976f,  0.129517278f, 0.129765857f};
    float p = c[0];
#pragma unroll
    for (int i = 1; i < 6; ++i)
      p = p * t + c[i];
    const float upper = t * exp2f(x * (x * -0.72134752f)) * p;
    return x * (x < 0.0f ? upper : 1.0f - upper);
  }
};

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e = (call);                                                                        \
    if (e != cudaSuccess) {                                                                        \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));                        \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

// Two 16-bit elements of a and b as one 32-bit word each: converted as pairs (one instruction each
// way for bf16: shifts/masks in, cvt.rn.bf16x2.f32 out; half2 conversions for half).
template <typename ACT, typename T> __device__ inline unsigned gated_pair(unsigned a, unsigned b);
template <typename ACT> __device__ inline unsigned gated_pair_bf16(unsigned a, unsigned b) {
  const float a0 = __uint_as_float(a << 16), a1 = __uint_as_float(a & 0xffff0000u);
  const float b0 = __uint_as_float(b << 16), b1 = __uint_as_float(b & 0xffff0000u);
  const __nv_bfloat162 r =
      __floats2bfloat162_rn(ACT::template apply<true>(a0) * b0, ACT::template apply<true>(a1) * b1);
  return *reinterpret_cast<const unsigned *>(&r);
}
template <typename ACT> __device__ inline unsigned gated_pair_half(unsigned a, unsigned b) {
  const float2 fa = __half22float2(*reinterpret_cast<const __half2 *>(&a));
  const float2 fb = __half22float2(*reinterpret_cast<const __half2 *>(&b));
  const __half2 r = __floats2half2_rn(ACT::template apply<true>(fa.x) * fb.x,
                                      ACT::template apply<true>(fa.y) * fb.y);
  return *reinterpret_cast<const unsigned *>(&r);
}

template <typename ACT, typename T, int UNROLL>
__global__ void __launch_bounds__(256)
    gated_flat_packed(T *out, const T *x, int d, unsigned total) {
  const unsigned vpr = d / 8;
  const unsigned first = blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
  uint4 va[UNROLL], vb[UNROLL];
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    const unsigned v = first + k * blockDim.x;
    if (v < total) {
      const unsigned row = v / vpr, col = v - row * vpr;
      const uint4 *a =
          reinterpret_cast<const uint4 *>(x) + static_cast<long long>(row) * 2 * vpr + col;
      va[k] = *a;
      vb[k] = a[vpr];
    }
  }
#pragma unroll
  for (int k = 0; k < UNROLL; ++k) {
    const unsigned v = first + k * blockDim.x;
    if (v < total) {
      uint4 r;
      if constexpr (sizeof(T) == 2 && std::is_same_v<T, half>) {
        r.x = gated_pair_half<ACT>(va[k].x, vb[k].x);
        r.y = gated_pair_half<ACT>(va[k].y, vb[k].y);
        r.z = gated_pair_half<ACT>(va[k].z, vb[k].z);
        r.w = gated_pair_half<ACT>(va[k].w, vb[k].w);
      } else {
        r.x = gated_pair_bf16<ACT>(va[k].x, vb[k].x);
        r.y = gated_pair_bf16<ACT>(va[k].y, vb[k].y);
        r.z = gated_pair_bf16<ACT>(va[k].z, vb[k].z);
        r.w = gated_pair_bf16<ACT>(va[k].w, vb[k].w);
      }
      reinterpret_cast<uint4 *>(out)[v] = r;
    }
  }
}

static float *scratch_fill(void *p, size_t bytes, bool bf) {
  std::vector<unsigned short> h(bytes / 2);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (auto &v : h) {
    float f = u(rng);
    unsigned bits;
    std::memcpy(&bits, &f, 4);
    if (bf)
      v = bits >> 16;
    else {
      __half hv = __float2half(f);
      std::memcpy(&v, &hv, 2);
    }
  }
  CHECK(cudaMemcpy(p, h.data(), bytes, cudaMemcpyHostToDevice));
  return nullptr;
}

template <typename F> static float time_us(F launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    launch();
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(a));
    for (int i = 0; i < 50; ++i)
      launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms * 1000 / 50);
  }
  CHECK(cudaGetLastError());
  return best;
}

static double copy_gbs;
static void report(const char *name, const char *type, int rows, int cols, double bytes, float us) {
  const double gbs = bytes / us / 1e3;
  std::printf("%-28s %-5s %6dx%-6d %8.1f us %8.1f GB/s %6.1f%%\n", name, type, rows, cols, us, gbs,
              100 * gbs / copy_gbs);
}

template <typename T> static void run_type(const char *type, void *in, void *out) {
  constexpr int VEC = 8;
  for (int rows : {8192, 16384, 32768}) {
    const int hidden = 8192, d = hidden / 2;
    const long long n = static_cast<long long>(rows) * hidden;
    T *x = static_cast<T *>(in), *y = static_cast<T *>(out);
    const double flat_bytes = 2.0 * n * sizeof(T), gated_bytes = 1.5 * n * sizeof(T);
    const unsigned blocks4 = (n + 256 * 2 * VEC - 1) / (256 * 2 * VEC); // UNROLL 2
    report("gelu template", type, rows, hidden, flat_bytes,
           time_us([&] { activation<gelu, T, VEC><<<blocks4, 256>>>(y, x, n); }));
    report("gelu_exp2 template", type, rows, hidden, flat_bytes,
           time_us([&] { activation<gelu_exp2, T, VEC><<<blocks4, 256>>>(y, x, n); }));
    report("gelu_tanh template", type, rows, hidden, flat_bytes,
           time_us([&] { activation<gelu_tanh, T, VEC><<<blocks4, 256>>>(y, x, n); }));
    report("silu template", type, rows, hidden, flat_bytes,
           time_us([&] { activation<silu, T, VEC><<<blocks4, 256>>>(y, x, n); }));
    const unsigned total = static_cast<unsigned>(rows) * (d / VEC);
    const unsigned gblocks = (total + 511) / 512;
    report("silu_and_mul template", type, rows, d, gated_bytes,
           time_us([&] { gated_activation<silu, T, VEC><<<gblocks, 256>>>(y, x, d, total); }));
    report("gelu_and_mul template", type, rows, d, gated_bytes,
           time_us([&] { gated_activation<gelu, T, VEC><<<gblocks, 256>>>(y, x, d, total); }));
    report("gelu_exp2_and_mul template", type, rows, d, gated_bytes,
           time_us([&] { gated_activation<gelu_exp2, T, VEC><<<gblocks, 256>>>(y, x, d, total); }));
    report("silu_and_mul packed U2", type, rows, d, gated_bytes,
           time_us([&] { gated_flat_packed<silu, T, 2><<<gblocks, 256>>>(y, x, d, total); }));
    report("gelu_and_mul packed U2", type, rows, d, gated_bytes,
           time_us([&] { gated_flat_packed<gelu, T, 2><<<gblocks, 256>>>(y, x, d, total); }));
  }
}

int main() {
  const size_t bytes = size_t{32768} * 8192 * 2;
  void *in, *out;
  CHECK(cudaMalloc(&in, bytes));
  CHECK(cudaMalloc(&out, bytes));
  scratch_fill(in, bytes, false);
  const size_t copy_bytes = size_t{512} << 20;
  const float us =
      time_us([&] { CHECK(cudaMemcpyAsync(out, in, copy_bytes, cudaMemcpyDeviceToDevice)); });
  copy_gbs = 2.0 * copy_bytes / us / 1e3;
  std::printf("copy %.1f GB/s\n", copy_gbs);
  for (int pass = 0; pass < 2; ++pass) {
    scratch_fill(in, bytes, false);
    run_type<half>("half", in, out);
    scratch_fill(in, bytes, true);
    run_type<bfloat16>("bf16", in, out);
  }
  return 0;
}

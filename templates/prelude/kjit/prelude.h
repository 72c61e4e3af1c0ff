// kjit prelude: what differs between HIP (hiprtc) and CUDA (NVRTC), named once so that a
// kernel is written once for both. kjit includes it before every template source.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIP__)
#define KJIT_HIP 1
// hiprtc has the HIP headers built in: __half needs no #include (and including them again from
// /usr/include breaks). hiprtc 5.2 has no bfloat16 type it can compile (hip_bfloat16.h pulls in
// host headers; __bf16 "is not supported on this target"), so kjit defines one: the top 16
// bits of a float, rounded to nearest even, as hip_bfloat16 and __nv_bfloat16 store it.
typedef __half half;
namespace kjit {
struct bfloat16 {
  unsigned short bits;
  bfloat16() = default;
  __device__ explicit bfloat16(float value) {
    const unsigned u = __float_as_uint(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a quiet NaN
      bits = static_cast<unsigned short>((u >> 16) | 0x40u);
    else
      bits = static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  __device__ explicit operator float() const { return __uint_as_float(unsigned(bits) << 16); }
};
} // namespace kjit
typedef kjit::bfloat16 bfloat16;
#define KJIT_RESTRICT __restrict__
#else
#define KJIT_CUDA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
typedef __nv_bfloat16 bfloat16;
#define KJIT_RESTRICT __restrict__
#endif

// The fixed-width integer types, on every release: NVRTC declares none, and hiprtc 5.2 only the
// 32- and 64-bit ones, while <cstdint> is no remedy (NVRTC has no such header; hiprtc 5.2's host
// <stdint.h> redefines int64_t as long). These are the types every hiprtc release's own
// declarations name, so repeating one of those is allowed. Include no <cstdint>: use these.
// Only for the runtime compilers: a host build of the prelude (tests/ops' CPU emulation) has its
// own <cstdint>.
#if defined(__HIPCC_RTC__) || defined(__CUDACC_RTC__)
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef signed short int16_t;
typedef unsigned short uint16_t;
typedef signed int int32_t;
typedef unsigned int uint32_t;
typedef signed long long int64_t;
typedef unsigned long long uint64_t;
namespace std {
using ::int16_t;
using ::int32_t;
using ::int64_t;
using ::int8_t;
using ::uint16_t;
using ::uint32_t;
using ::uint64_t;
using ::uint8_t;
} // namespace std
#endif

// The warp (wavefront) width of the target: 64 on CDNA (gfx9), 32 on RDNA and NVIDIA. Passed in
// by the runtime from the target, never assumed.
#ifndef KJIT_WARP_SIZE
#error "KJIT_WARP_SIZE is defined by kjit from the target"
#endif

namespace kjit {
// Converts through float, the one type every element type converts to and from on both vendors.
template <typename T> __device__ inline float to_float(T x) { return static_cast<float>(x); }
template <typename T> __device__ inline T from_float(float x) { return static_cast<T>(x); }
} // namespace kjit

// Reductions across a warp and across a block, for kernels that reduce a row (norms, softmax,
// quantisation scales). Every lane of the warp (thread of the block) must call them, and gets the
// result. The block forms take blockDim.x a multiple of KJIT_WARP_SIZE and at most
// KJIT_WARP_SIZE warps, and synchronise the block twice.
namespace kjit {

template <typename T> __device__ inline T shuffle_xor(T value, int lane_mask) {
#if KJIT_HIP
  return __shfl_xor(value, lane_mask, KJIT_WARP_SIZE);
#else
  return __shfl_xor_sync(0xffffffffu, value, lane_mask, KJIT_WARP_SIZE);
#endif
}

struct Sum {
  template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

template <typename Op, typename T> __device__ inline T warp_reduce(T value, Op op) {
#pragma unroll
  for (int mask = KJIT_WARP_SIZE / 2; mask > 0; mask /= 2)
    value = op(value, shuffle_xor(value, mask));
  return value;
}

template <typename Op, typename T> __device__ inline T block_reduce(T value, Op op) {
  __shared__ T partial[KJIT_WARP_SIZE];
  const int lane = threadIdx.x % KJIT_WARP_SIZE;
  const int warp = threadIdx.x / KJIT_WARP_SIZE;
  const int warps = blockDim.x / KJIT_WARP_SIZE;
  value = warp_reduce(value, op);
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  // Every thread folds the warps' partials in order (broadcast reads): a shuffle reduction over
  // the first `warps` lanes would need an identity for the lanes past them, or it counts a
  // partial twice in a sum.
  value = partial[0];
  for (int w = 1; w < warps; ++w)
    value = op(value, partial[w]);
  __syncthreads(); // partial[] may be reused by the caller's next reduction
  return value;
}

template <typename T> __device__ inline T warp_sum(T value) { return warp_reduce(value, Sum{}); }
template <typename T> __device__ inline T warp_max(T value) { return warp_reduce(value, Max{}); }
template <typename T> __device__ inline T block_sum(T value) { return block_reduce(value, Sum{}); }
template <typename T> __device__ inline T block_max(T value) { return block_reduce(value, Max{}); }

} // namespace kjit

// Reductions across the THREADS consecutive threads that share one row of a row-wise kernel
// (norms, softmax): the block is THREADS wide (blockDim.x == THREADS, a power of two) and holds
// blockDim.y rows. A row of at most a warp reduces with shuffles inside aligned groups of THREADS
// lanes, so several rows share a warp and a block; a wider row takes the whole block
// (blockDim.y == 1) through block_reduce. Every thread of the block must call it.
namespace kjit {

template <int THREADS, typename Op, typename T> __device__ inline T row_reduce(T value, Op op) {
  static_assert(THREADS > 0 && (THREADS & (THREADS - 1)) == 0, "THREADS is a power of two");
  if (THREADS > KJIT_WARP_SIZE) {
    value = block_reduce(value, op);
  } else {
#pragma unroll
    for (int mask = THREADS / 2; mask > 0; mask /= 2)
      value = op(value, shuffle_xor(value, mask));
  }
  return value;
}

template <int THREADS, typename T> __device__ inline T row_sum(T value) {
  return row_reduce<THREADS>(value, Sum{});
}
template <int THREADS, typename T> __device__ inline T row_max(T value) {
  return row_reduce<THREADS>(value, Max{});
}

// N consecutive elements moved as one access: 16 bytes (a float4, 8 halves) is the widest load
// and store both vendors issue. The address must be aligned to sizeof(T) * N; kernels pick N at
// compile time from parameters the host chose knowing the pointers and the row length.
template <typename T, int N> struct alignas(sizeof(T) * N) Vec { T at[N]; };

template <int N, typename T> __device__ inline Vec<T, N> load_vec(const T *p) {
  return *reinterpret_cast<const Vec<T, N> *>(p);
}
template <int N, typename T> __device__ inline void store_vec(T *p, const Vec<T, N> &v) {
  *reinterpret_cast<Vec<T, N> *>(p) = v;
}

// A vector's elements as floats, and floats back into the vector, for kernels that compute in
// float whatever the element type. Where the hardware converts two 16-bit elements at once, they
// convert in pairs, from and to the 32-bit word that holds them: on CUDA (cvt.rn.bf16x2.f32
// rounds a pair in one instruction; a bf16 is a float's top 16 bits, so unpacking is a shift and a
// mask), and bf16 on gfx950 (v_cvt_pk_bf16_f32, which the compiler emits for a conversion of a
// float pair to a __bf16 pair; kjit's bfloat16 rounds one element in five instructions).
// Converted one at a time, bf16 kernels fall well short of the copy bandwidth (BENCHMARKS.md,
// "Evidence behind the code's choices").
template <typename T, int N> __device__ inline void to_floats(const Vec<T, N> &v, float (&f)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e)
    f[e] = to_float(v.at[e]);
}
template <typename T, int N> __device__ inline void from_floats(const float (&f)[N], Vec<T, N> &v) {
#pragma unroll
  for (int e = 0; e < N; ++e)
    v.at[e] = from_float<T>(f[e]);
}

// (The gfx950 form needs clang's vector types: a host compiler emulating gfx950 kernels, which
// defines __gfx950__ but not __AMDGCN__, takes the element-wise form.)
#if KJIT_CUDA || (defined(__gfx950__) && defined(__AMDGCN__))
template <typename T> struct Pairs;
#if KJIT_CUDA
template <> struct Pairs<__half> {
  using type = __half2;
  __device__ static float2 unpack(type p) { return __half22float2(p); }
  __device__ static type pack(float a, float b) { return __floats2half2_rn(a, b); }
};
template <> struct Pairs<bfloat16> {
  using type = __nv_bfloat162;
  __device__ static float2 unpack(type p) {
    const unsigned bits = *reinterpret_cast<const unsigned *>(&p);
    return make_float2(__uint_as_float(bits << 16), __uint_as_float(bits & 0xffff0000u));
  }
  __device__ static type pack(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
#else
template <> struct Pairs<bfloat16> {
  typedef __bf16 type __attribute__((ext_vector_type(2)));
  typedef float floats __attribute__((ext_vector_type(2)));
  __device__ static float2 unpack(type p) {
    const floats two = __builtin_convertvector(p, floats);
    return make_float2(two.x, two.y);
  }
  __device__ static type pack(float a, float b) {
    return __builtin_convertvector((floats){a, b}, type);
  }
};
#endif
// An odd N's last element converts alone.
template <typename T, int N>
__device__ inline void pairs_to_floats(const Vec<T, N> &v, float (&f)[N]) {
  const auto *pairs = reinterpret_cast<const typename Pairs<T>::type *>(v.at);
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const float2 two = Pairs<T>::unpack(pairs[i]);
    f[2 * i] = two.x;
    f[2 * i + 1] = two.y;
  }
  if (N % 2 == 1)
    f[N - 1] = to_float(v.at[N - 1]);
}
template <typename T, int N>
__device__ inline void floats_to_pairs(const float (&f)[N], Vec<T, N> &v) {
  auto *pairs = reinterpret_cast<typename Pairs<T>::type *>(v.at);
#pragma unroll
  for (int i = 0; i < N / 2; ++i)
    pairs[i] = Pairs<T>::pack(f[2 * i], f[2 * i + 1]);
  if (N % 2 == 1)
    v.at[N - 1] = from_float<T>(f[N - 1]);
}
template <int N> __device__ inline void to_floats(const Vec<bfloat16, N> &v, float (&f)[N]) {
  pairs_to_floats(v, f);
}
template <int N> __device__ inline void from_floats(const float (&f)[N], Vec<bfloat16, N> &v) {
  floats_to_pairs(f, v);
}
#endif
#if KJIT_CUDA
template <int N> __device__ inline void to_floats(const Vec<__half, N> &v, float (&f)[N]) {
  pairs_to_floats(v, f);
}
template <int N> __device__ inline void from_floats(const float (&f)[N], Vec<__half, N> &v) {
  floats_to_pairs(f, v);
}
#endif

// 2^x, e^x and 1/x through the hardware's approximations (relative error about 2^-21 for |x| <
// 80), for kernels whose results are rounded to 16 bits or tolerate float's last few bits.
// Results and arguments below float's normal range may flush to zero. They are one instruction
// each: on CUDA ex2 and rcp .approx.ftz (__expf and __fdividef, without -ftz, wrap theirs in a
// range check and two scalings, enough instructions to leave 16-bit gelu issue-bound), on AMD
// v_exp_f32 and v_rcp_f32 (exp2f wraps v_exp_f32 in a scaling for results below the normal range,
// and HIP's __fdividef is a full IEEE division). BENCHMARKS.md, "Evidence behind the code's
// choices" and "AMD fast paths".
#if KJIT_CUDA
__device__ inline float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ inline float fast_reciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#else
// ROCm 5's compiler has no __builtin_amdgcn_exp2f: there exp2f keeps its scaling. (Compiled for
// the host, as the CPU emulation of the kernels does, the builtins are the emulation's models.)
__device__ inline float fast_exp2(float x) {
#if defined(__AMDGCN__) && !__has_builtin(__builtin_amdgcn_exp2f)
  return exp2f(x);
#else
  return __builtin_amdgcn_exp2f(x);
#endif
}
__device__ inline float fast_reciprocal(float x) { return __builtin_amdgcn_rcpf(x); }
#endif
__device__ inline float fast_exp(float x) { return fast_exp2(x * 1.44269504088896341f); }

// Programmatic dependent launch (NVIDIA sm_90 and newer; no-ops elsewhere, and in a launch made
// without it): a kernel the host launches with LaunchConfig::overlap_previous may start its blocks
// once every block of the stream's previous kernel has run let_dependents_start (or exited), and
// must run wait_for_previous_grid, which returns when that kernel has completed and its writes are
// visible, before it touches what that kernel may write.
#if KJIT_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ inline void let_dependents_start() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ inline void wait_for_previous_grid() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
#else
__device__ inline void let_dependents_start() {}
__device__ inline void wait_for_previous_grid() {}
#endif

} // namespace kjit

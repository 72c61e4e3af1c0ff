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

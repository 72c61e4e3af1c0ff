// kjit prelude: what differs between HIP (hiprtc) and CUDA (NVRTC), named once so that a
// kernel is written once for both. kjit includes it before every template source.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIP__)
#define KJIT_HIP 1
// hiprtc has the HIP headers built in: __half and hip_bfloat16 need no #include.
typedef __half half;
typedef hip_bfloat16 bfloat16;
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

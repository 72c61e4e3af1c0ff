// mylib's device helpers, #included by its kernels as "mylib/math.h".
#pragma once
namespace mylib {
__device__ inline float square(float v) { return v * v; }
__device__ inline float inverse_sqrt(float v) { return rsqrtf(v); }
} // namespace mylib

#include <cstdint>
#include "kjit/prelude.h"
#include "kjit/hopper.h"
using namespace kjit::hopper;
// Each tile either one wgmma of 256 columns (128 accumulators) or two of N (N / 2 each).
template <int N, int KILL>
__global__ void __launch_bounds__(384, 1) k(float *out, const uint64_t *descs, const int *roles, int n, int tiles) {
  int wg = threadIdx.x / 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) out[0] = descs[0];
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    constexpr int ACC = N > 128 ? N : 128;
    float acc[ACC];
    uint64_t a = descs[1], b = descs[2];
    for (int t = 0; t < tiles; ++t) {
      if (KILL)
#pragma unroll
        for (int i = 0; i < ACC; ++i)
          asm volatile("" : "=f"(acc[i]));
      const int role = roles[t];
      if (role == 1) {
        float g[N / 2], u[N / 2];
#pragma unroll
        for (int i = 0; i < N / 2; ++i)
          asm volatile("" : "=f"(g[i]), "=f"(u[i]));
        for (int kb = 0; kb < n; ++kb) {
          wgmma_fence();
          for (int kk = 0; kk < 4; ++kk) {
            WgmmaShared<__nv_bfloat16, N, 0>::run(g, a + kb * 8 + kk, b + kb + kk, kb > 0 || kk > 0);
            WgmmaShared<__nv_bfloat16, N, 0>::run(u, a + kb * 8 + kk + 512, b + kb + kk, kb > 0 || kk > 0);
          }
          wgmma_commit();
          wgmma_wait<1>();
          if (threadIdx.x % 128 == 0) out[kb + 8] = 1.0f;
        }
        wgmma_wait<0>();
        for (int i = 0; i < N / 2; ++i) out[t * 100000 + threadIdx.x * N + i] = g[i] + u[i];
      } else {
        float c[128];
#pragma unroll
        for (int i = 0; i < 128; ++i)
          asm volatile("" : "=f"(c[i]));
        for (int kb = 0; kb < n; ++kb) {
          wgmma_fence();
          for (int kk = 0; kk < 4; ++kk)
            WgmmaShared<__nv_bfloat16, 256, 0>::run(c, a + kb * 8 + kk, b + kb + kk, kb > 0 || kk > 0);
          wgmma_commit();
          wgmma_wait<1>();
          if (threadIdx.x % 128 == 0) out[kb + 8] = 1.0f;
        }
        wgmma_wait<0>();
        for (int i = 0; i < 128; ++i) out[t * 100000 + threadIdx.x * 128 + i] = c[i];
      }
    }
  }
}
template __global__ void k<160, 0>(float *, const uint64_t *, const int *, int, int);
template __global__ void k<192, 0>(float *, const uint64_t *, const int *, int, int);
template __global__ void k<160, 1>(float *, const uint64_t *, const int *, int, int);
template __global__ void k<192, 1>(float *, const uint64_t *, const int *, int, int);

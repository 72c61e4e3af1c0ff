#include <cstdint>
#include "kjit/prelude.h"
#include "kjit/hopper.h"
using namespace kjit::hopper;
// Two wgmma of N columns (N / 2 accumulators each) a k16, pipelined one stage deep.
template <int N>
__global__ void __launch_bounds__(384, 1) k(float *out, const uint64_t *descs, int n) {
  int wg = threadIdx.x / 128;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x == 0) out[0] = descs[0];
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    float acc[N];
    float(&g)[N / 2] = *reinterpret_cast<float(*)[N / 2]>(acc);
    float(&u)[N / 2] = *reinterpret_cast<float(*)[N / 2]>(acc + N / 2);
    uint64_t a = descs[1], b = descs[2];
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
    for (int i = 0; i < N; ++i) out[threadIdx.x * N + i] = acc[i];
  }
}
template __global__ void k<128>(float *, const uint64_t *, int);
template __global__ void k<144>(float *, const uint64_t *, int);
template __global__ void k<160>(float *, const uint64_t *, int);
template __global__ void k<192>(float *, const uint64_t *, int);

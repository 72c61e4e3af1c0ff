// Standalone Hopper GEMM experiment (sm_90a): C[M,N] = A[M,K] @ B, A row-major, B either
// row-major [K,N] (B_KMAJOR = 0, wgmma's transposed B) or an nn.Linear weight W[N,K]
// (B_KMAJOR = 1, C = A @ W^T). Warp-specialised: warpgroup 0 issues TMA loads (128-byte swizzle)
// into a STAGES-deep ring guarded by mbarriers; warpgroups 1 and 2 each own 64 rows of a
// 128 x BN tile and run wgmma from shared-memory descriptors. Persistent grid, grouped tile order.
//
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a gemm_wgmma.cu -lcuda -lcublas
//   ./gemm_wgmma            correctness sweep then timings (cuBLAS in the same process)
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "wgmma_ops.cuh"

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);               \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

namespace dev {

__device__ inline unsigned smem(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ inline void bar_init(uint64_t *bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem(bar)), "r"(count));
}
__device__ inline void bar_expect(uint64_t *bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem(bar)),
               "r"(bytes));
}
__device__ inline void bar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem(bar)));
}
__device__ inline void bar_wait(uint64_t *bar, unsigned phase) {
  asm volatile("{\n.reg .pred p;\nWAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAIT_%=;\n}\n" ::"r"(smem(bar)),
               "r"(phase));
}
__device__ inline void tma_load(void *dst, const CUtensorMap *map, uint64_t *bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem(dst)),
               "l"(reinterpret_cast<uint64_t>(map)), "r"(smem(bar)), "r"(c0), "r"(c1)
               : "memory");
}
// A shared-memory matrix descriptor, 128-byte swizzle: start, leading and stride byte offsets.
__device__ inline uint64_t descriptor(const void *p, unsigned lbo, unsigned sbo) {
  return (uint64_t)((smem(p) & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
__device__ inline void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ inline void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int REGS> __device__ inline void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS> __device__ inline void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

template <typename T> __device__ inline unsigned pack(float lo, float hi);
template <> __device__ inline unsigned pack<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&v);
}
template <> __device__ inline unsigned pack<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&v);
}
template <typename T> __device__ inline T one(float v);
template <> __device__ inline __nv_bfloat16 one<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ inline __half one<__half>(float v) { return __float2half_rn(v); }

template <int BN, int TRANS_B, typename T>
__device__ inline void wgmma(float (&d)[BN / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (BN == 256)
    wgmma_n256<TRANS_B>(d, da, db, scale_d, (T *)nullptr);
  else if constexpr (BN == 128)
    wgmma_n128<TRANS_B>(d, da, db, scale_d, (T *)nullptr);
  else
    wgmma_n64<TRANS_B>(d, da, db, scale_d, (T *)nullptr);
}

} // namespace dev

constexpr int BM = 128, BK = 64;

template <int BN, int STAGES> struct Layout {
  static constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
  static constexpr int STAGE = A_BYTES + B_BYTES;
  static constexpr int SHARED = STAGES * STAGE + 1024 /*alignment*/ + 2 * STAGES * 8;
};

// lbo_mn/sbo_mn: the MN-major B descriptor's offsets (run-time, so one binary tries both
// readings of the layout).
template <typename T, int BN, int STAGES, int B_KMAJOR, int GROUP_M>
__global__ void __launch_bounds__(384, 1)
    gemm_wgmma(T *c, const __grid_constant__ CUtensorMap map_a,
               const __grid_constant__ CUtensorMap map_b, int m, int n, int k, int lbo_mn,
               int sbo_mn) {
  using L = Layout<BN, STAGES>;
  extern __shared__ unsigned char raw[];
  unsigned char *base = reinterpret_cast<unsigned char *>(
      (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
  uint64_t *full = reinterpret_cast<uint64_t *>(base + STAGES * L::STAGE);
  uint64_t *empty = full + STAGES;

  const int wg = threadIdx.x / 128, lane_in_wg = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      dev::bar_init(&full[s], 1);
      dev::bar_init(&empty[s], 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int tiles_m = (m + BM - 1) / BM, tiles_n = (n + BN - 1) / BN;
  const int tiles = tiles_m * tiles_n, k_blocks = (k + BK - 1) / BK;
  auto place = [&](int t, int &tm, int &tn) {
    const int per_group = GROUP_M * tiles_n, group = t / per_group;
    const int first = group * GROUP_M, size = min(tiles_m - first, GROUP_M);
    tm = first + (t % per_group) % size;
    tn = (t % per_group) / size;
  };

  if (wg == 0) {
    dev::setmaxnreg_dec<40>();
    if (lane_in_wg == 0) {
      int s = 0;
      unsigned phase = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        place(t, tm, tn);
        for (int kb = 0; kb < k_blocks; ++kb) {
          dev::bar_wait(&empty[s], phase ^ 1);
          unsigned char *a_s = base + s * L::STAGE, *b_s = a_s + L::A_BYTES;
          dev::bar_expect(&full[s], L::STAGE);
          dev::tma_load(a_s, &map_a, &full[s], kb * BK, tm * BM);
          if (B_KMAJOR) {
            dev::tma_load(b_s, &map_b, &full[s], kb * BK, tn * BN);
          } else {
#pragma unroll
            for (int j = 0; j < BN / 64; ++j)
              dev::tma_load(b_s + j * 64 * BK * 2, &map_b, &full[s], tn * BN + j * 64, kb * BK);
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    dev::setmaxnreg_inc<232>();
    const int cw = wg - 1; // this consumer's 64 rows
    const int warp = lane_in_wg / 32, lane = lane_in_wg % 32;
    float acc[BN / 2];
    int s = 0;
    unsigned phase = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
      int tm, tn;
      place(t, tm, tn);
      int prev = -1;
      for (int kb = 0; kb < k_blocks; ++kb) {
        dev::bar_wait(&full[s], phase);
        unsigned char *a_s = base + s * L::STAGE + cw * 64 * 128,
                      *b_s = base + s * L::STAGE + L::A_BYTES;
        dev::wg_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          const uint64_t da = dev::descriptor(a_s + kk * 32, 16, 1024);
          uint64_t db;
          if (B_KMAJOR)
            db = dev::descriptor(b_s + kk * 32, 16, 1024);
          else
            db = dev::descriptor(b_s + kk * 16 * 128, lbo_mn, sbo_mn);
          dev::wgmma<BN, B_KMAJOR ? 0 : 1, T>(acc, da, db, (kb > 0 || kk > 0) ? 1 : 0);
        }
        dev::wg_commit();
        dev::wg_wait<1>();
        if (prev >= 0 && lane_in_wg == 0)
          dev::bar_arrive(&empty[prev]);
        prev = s;
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      dev::wg_wait<0>();
      if (prev >= 0 && lane_in_wg == 0)
        dev::bar_arrive(&empty[prev]);
      // Accumulator layout of m64nNk16: register 4j + 2h + e holds (row 16*warp + lane/4 + 8h,
      // col 8j + 2*(lane%4) + e).
      const int row0 = tm * BM + cw * 64 + warp * 16 + lane / 4;
      const int col0 = tn * BN + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + 8 * h;
          if (row < m && col < n) {
            T *at = c + (size_t)row * n + col;
            if (col + 1 < n)
              *reinterpret_cast<unsigned *>(at) =
                  dev::pack<T>(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
            else
              *at = dev::one<T>(acc[4 * j + 2 * h]);
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- host

static CUtensorMap make_map(const void *ptr, uint64_t inner, uint64_t outer, uint32_t box_inner,
                            uint32_t box_outer, CUtensorMapDataType type) {
  CUtensorMap map;
  cuuint64_t dims[2] = {inner, outer};
  cuuint64_t strides[1] = {inner * 2};
  cuuint32_t box[2] = {box_inner, box_outer};
  cuuint32_t elem[2] = {1, 1};
  CUresult r =
      cuTensorMapEncodeTiled(&map, type, 2, const_cast<void *>(ptr), dims, strides, box, elem,
                             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed %d\n", (int)r);
    std::exit(1);
  }
  return map;
}

template <typename T> struct TypeOf;
template <> struct TypeOf<__nv_bfloat16> {
  static constexpr CUtensorMapDataType map = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr cudaDataType blas = CUDA_R_16BF;
  static constexpr const char *name = "bf16";
};
template <> struct TypeOf<__half> {
  static constexpr CUtensorMapDataType map = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  static constexpr cudaDataType blas = CUDA_R_16F;
  static constexpr const char *name = "fp16";
};

static int sms = 132;
static int g_lbo = 8192, g_sbo = 1024; // MN-major B, BN chunks of 64 columns x BK rows

template <typename T, int BN, int STAGES, int B_KMAJOR, int GROUP_M = 8>
void launch(T *c, const T *a, const T *b, int m, int n, int k, cudaStream_t stream = 0) {
  using L = Layout<BN, STAGES>;
  auto kernel = gemm_wgmma<T, BN, STAGES, B_KMAJOR, GROUP_M>;
  static bool once = [&] {
    CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::SHARED));
    return true;
  }();
  (void)once;
  CUtensorMap ma = make_map(a, k, m, BK, BM, TypeOf<T>::map);
  CUtensorMap mb = B_KMAJOR ? make_map(b, k, n, BK, BN, TypeOf<T>::map)
                            : make_map(b, n, k, 64, BK, TypeOf<T>::map);
  const int tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
  kernel<<<std::min(tiles, sms), 384, L::SHARED, stream>>>(c, ma, mb, m, n, k, g_lbo, g_sbo);
}

static float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
static float to_f(__half v) { return __half2float(v); }

template <typename T> std::vector<T> random_matrix(size_t count, std::mt19937 &gen, float scale) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<T> v(count);
  for (auto &x : v)
    x = T(dist(gen) * scale);
  return v;
}

// A and B uploaded, C allocated for m x n.
template <typename T>
void device_operands(const std::vector<T> &ha, const std::vector<T> &hb, size_t c_count, T *&a,
                     T *&b, T *&c) {
  CHECK(cudaMalloc(&a, ha.size() * 2));
  CHECK(cudaMalloc(&b, hb.size() * 2));
  CHECK(cudaMalloc(&c, c_count * 2));
  CHECK(cudaMemcpy(a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
}

// Relative Frobenius error of C against an fp64 reference, on every element (small shapes) or
// on `samples` random elements (large ones); also counts unwritten (poisoned, NaN) outputs.
template <typename T, int BN, int STAGES, int B_KMAJOR>
bool check(int m, int n, int k, std::mt19937 &gen, int samples = 0) {
  const float scale = 1.0f / std::sqrt(std::sqrt((float)k)) * 4.0f;
  auto ha = random_matrix<T>((size_t)m * k, gen, scale);
  auto hb = random_matrix<T>((size_t)k * n, gen, scale);
  T *a, *b, *c;
  device_operands(ha, hb, (size_t)m * n, a, b, c);
  CHECK(cudaMemset(c, 0xFF, (size_t)m * n * 2)); // NaN in both types
  launch<T, BN, STAGES, B_KMAJOR>(c, a, b, m, n, k);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<T> hc((size_t)m * n);
  CHECK(cudaMemcpy(hc.data(), c, hc.size() * 2, cudaMemcpyDeviceToHost));
  double err = 0, ref = 0;
  long bad = 0;
  auto one = [&](int i, int j) {
    double r = 0;
    for (int p = 0; p < k; ++p) {
      const double bv = B_KMAJOR ? to_f(hb[(size_t)j * k + p]) : to_f(hb[(size_t)p * n + j]);
      r += (double)to_f(ha[(size_t)i * k + p]) * bv;
    }
    const double got = to_f(hc[(size_t)i * n + j]);
    if (!std::isfinite(got))
      ++bad;
    else
      err += (got - r) * (got - r);
    ref += r * r;
  };
  if (samples == 0) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j)
        one(i, j);
  } else {
    std::uniform_int_distribution<int> ri(0, m - 1), rj(0, n - 1);
    for (int s = 0; s < samples; ++s)
      one(ri(gen), rj(gen));
    // The last row and column, where ragged tiles end.
    for (int j = 0; j < n; j += 7)
      one(m - 1, j);
    for (int i = 0; i < m; i += 7)
      one(i, n - 1);
  }
  // Every element written: a full scan for NaN (the poison).
  long unwritten = 0;
  for (auto v : hc)
    unwritten += !std::isfinite(to_f(v));
  const double rel = std::sqrt(err / ref);
  const bool ok = unwritten == 0 && bad == 0 && rel < 1e-2;
  std::printf("check %s BN=%d ST=%d B=%s m=%d n=%d k=%d: rel_err=%.2e unwritten=%ld %s\n",
              TypeOf<T>::name, BN, STAGES, B_KMAJOR ? "W[N,K]" : "B[K,N]", m, n, k, rel, unwritten,
              ok ? "PASS" : "FAIL");
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
  return ok;
}

template <typename F> float median_ms(F f, int reps = 20) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i)
    f();
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    CHECK(cudaEventRecord(e0));
    f();
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename T, int BN, int STAGES, int B_KMAJOR>
void bench(cublasHandle_t handle, int m, int n, int k) {
  std::mt19937 gen(7);
  auto ha = random_matrix<T>((size_t)m * k, gen, 1.0f);
  auto hb = random_matrix<T>((size_t)k * n, gen, 1.0f);
  T *a, *b, *c;
  device_operands(ha, hb, (size_t)m * n, a, b, c);
  const float ours = median_ms([&] { launch<T, BN, STAGES, B_KMAJOR>(c, a, b, m, n, k); });
  const float alpha = 1, beta = 0;
  // Row-major C = A B is column-major C^T = B^T A^T.
  const float blas = median_ms([&] {
    cublasGemmEx(handle, B_KMAJOR ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                 TypeOf<T>::blas, B_KMAJOR ? k : n, a, TypeOf<T>::blas, k, &beta, c,
                 TypeOf<T>::blas, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  });
  const double flop = 2.0 * m * n * k;
  std::printf("bench %s BN=%d ST=%d B=%s %dx%dx%d: kjit %.1f TFLOP/s (%.3f ms)  cublas %.1f "
              "(%.3f ms)  ratio %.3f\n",
              TypeOf<T>::name, BN, STAGES, B_KMAJOR ? "W[N,K]" : "B[K,N]", m, n, k,
              flop / ours / 1e9, ours, flop / blas / 1e9, blas, blas / ours);
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
}

int main(int argc, char **argv) {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  sms = prop.multiProcessorCount;
  std::printf("device %s, %d SMs\n", prop.name, sms);
  std::mt19937 gen(1234);
  bool ok = true;
  // Which reading of the MN-major descriptor holds: try both on a small shape first.
  {
    bool first = check<__nv_bfloat16, 128, 4, 0>(128, 128, 128, gen);
    if (!first) {
      std::swap(g_lbo, g_sbo);
      std::printf("retrying MN-major B with lbo=%d sbo=%d\n", g_lbo, g_sbo);
      first = check<__nv_bfloat16, 128, 4, 0>(128, 128, 128, gen);
    }
    ok &= first;
  }
  // Full checks, small shapes with every element, ragged (non-multiples of 128, 256, 64).
  ok &= check<__nv_bfloat16, 128, 4, 1>(128, 128, 128, gen);
  ok &= check<__nv_bfloat16, 256, 4, 1>(200, 264, 136, gen);
  ok &= check<__nv_bfloat16, 256, 4, 0>(200, 264, 136, gen);
  ok &= check<__half, 256, 4, 1>(77, 520, 72, gen);
  ok &= check<__half, 256, 4, 0>(77, 520, 72, gen);
  ok &= check<__nv_bfloat16, 128, 5, 0>(333, 136, 1000, gen);
  ok &= check<__nv_bfloat16, 256, 4, 1>(1, 4096, 4096, gen, 3000);
  // Large, sampled.
  ok &= check<__nv_bfloat16, 256, 4, 0>(4096, 4096, 4096, gen, 3000);
  ok &= check<__half, 256, 4, 1>(4096, 4096, 4096, gen, 3000);
  ok &= check<__nv_bfloat16, 256, 4, 1>(2000, 6144, 4104, gen, 3000);
  std::printf("correctness: %s\n", ok ? "ALL PASS" : "FAILURES");
  if (!ok)
    return 1;

  cublasHandle_t handle;
  cublasCreate(&handle);
  for (int s : {4096, 8192}) {
    bench<__nv_bfloat16, 256, 4, 0>(handle, s, s, s);
    bench<__nv_bfloat16, 256, 4, 1>(handle, s, s, s);
    bench<__half, 256, 4, 0>(handle, s, s, s);
    bench<__half, 256, 4, 1>(handle, s, s, s);
    bench<__nv_bfloat16, 128, 5, 1>(handle, s, s, s);
    bench<__nv_bfloat16, 256, 3, 1>(handle, s, s, s);
  }
  // Llama-3-8B projections (K x N), W[N,K] as nn.Linear holds it.
  const int kn[4][2] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}};
  for (auto &p : kn)
    for (int m : {1, 16, 128, 1024, 8192})
      bench<__nv_bfloat16, 256, 4, 1>(handle, m, p[1], p[0]);
  return 0;
}

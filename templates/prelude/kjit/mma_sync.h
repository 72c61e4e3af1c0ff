// NVIDIA mma.sync (sm_80 and newer) helpers for templates that feed tensor cores from shared
// memory by ldmatrix: m16n8k16 with float accumulators, and four 8 x 8 matrices per ldmatrix.
// flash_attention.hip and gemm_mma.hip include it (as kjit/mma_sync.h).
#pragma once

#if KJIT_CUDA
namespace kjit::mma_sync {

// c += A B for one m16n8k16 tile: A's registers hold (row, k) = (group [+8], 2t [+8] + {0, 1}),
// B's (k, n) = (2t [+8] + {0, 1}, group), C's (row, n) = (group [+8], 2t + {0, 1}), where
// lane = 4 * group + t.
template <typename T> struct Mma;
#define KJIT_MMA_SYNC(T, NAME)                                                                     \
  template <> struct Mma<T> {                                                                      \
    __device__ static void run(float *c, const unsigned (&a)[4], unsigned b0, unsigned b1) {       \
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." NAME "." NAME                          \
                   ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"                  \
                   : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));                \
    }                                                                                              \
  };
KJIT_MMA_SYNC(half, "f16")
KJIT_MMA_SYNC(bfloat16, "bf16")
#undef KJIT_MMA_SYNC

// Four 8 x 8 matrices of 16-bit elements from shared memory: lanes 8i..8i+7 give the addresses
// of matrix i's 8 rows (16 bytes each, 16-byte aligned), and lane 4g + t receives in r[i] the
// elements (g, 2t) and (g, 2t + 1) of matrix i (row, column), the lower in the low half; with
// TRANSPOSE, (2t, g) and (2t + 1, g).
template <bool TRANSPOSE> __device__ inline void ldmatrix_x4(unsigned (&r)[4], const void *row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if (TRANSPOSE)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
}

} // namespace kjit::mma_sync
#endif

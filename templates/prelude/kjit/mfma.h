// AMD matrix cores (MFMA) for half and bfloat16 on gfx942 (CDNA3) and gfx950 (CDNA4), shared by
// the templates that use them (gemm_mfma, flash_attention_mfma): one 32 x 32 x K product on a
// wavefront of 64 lanes, on gfx942 v_mfma_f32_32x32x8_f16 and v_mfma_f32_32x32x8_bf16 (K = 8),
// on gfx950 the 32x32x16 forms, which take twice the K per instruction.
//
// Operand and result layouts, per LLVM's AMDGPU builtins and AMD's matrix instruction
// calculator, for lane l of the wave and K_LANE = K / 2 (4 on gfx942, 8 on gfx950):
// - A: lane l holds A(row l % 32, k = (l / 32) * K_LANE + e) for e < K_LANE;
// - B: lane l holds B(k = (l / 32) * K_LANE + e, column l % 32);
// - C: lane l's register r holds C(row 8 * (r / 4) + 4 * (l / 32) + r % 4, column l % 32).
#pragma once

namespace kjit_mfma {

typedef float Accumulator __attribute__((vector_size(16 * sizeof(float))));

#if defined(__gfx950__)
constexpr int K_PER_MFMA = 16;
#else
constexpr int K_PER_MFMA = 8;
#endif
constexpr int K_LANE = K_PER_MFMA / 2;

// One 32 x 32 x K_PER_MFMA product on the wave: c + a @ b.
template <typename T> struct Mfma;
template <> struct Mfma<half> {
  typedef _Float16 Operand __attribute__((vector_size(K_LANE * 2)));
  __device__ static Accumulator run(Operand a, Operand b, Accumulator c) {
#if defined(__gfx950__)
    return __builtin_amdgcn_mfma_f32_32x32x16_f16(a, b, c, 0, 0, 0);
#else
    return __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, 0, 0, 0);
#endif
  }
};
template <> struct Mfma<bfloat16> {
#if defined(__gfx950__)
  typedef __bf16 Operand __attribute__((vector_size(K_LANE * 2)));
  __device__ static Accumulator run(Operand a, Operand b, Accumulator c) {
    return __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, b, c, 0, 0, 0);
  }
#else
  // gfx942's bf16 MFMA takes the raw 16-bit patterns.
  typedef short Operand __attribute__((vector_size(K_LANE * 2)));
  __device__ static Accumulator run(Operand a, Operand b, Accumulator c) {
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, 0, 0, 0);
  }
#endif
};

// A lane's operand: K_LANE consecutive elements (of LDS or registers), aligned to their size.
template <typename T> __device__ inline typename Mfma<T>::Operand operand(const T *at) {
  typename Mfma<T>::Operand value;
  __builtin_memcpy(&value, __builtin_assume_aligned(at, sizeof value), sizeof value);
  return value;
}

} // namespace kjit_mfma

#pragma once
// The FP8 GEMM on AMD matrix cores (templates gemm_fp8_mfma.hip): what kjit::ops::gemm_fp8_scaled
// and gemm_fp8_blockscale launch on gfx942 and gfx950, after their checks.
#include "kjit/ops/gemm_fp8.hpp"
#include "plans.hpp"
#include "variants.hpp"

namespace kjit::ops::detail {

// Whether the target's matrix cores take fp8 (gfx942, gfx950): gemm_fp8 runs gemm_fp8_mfma there.
bool gemm_fp8_mfma_serves(const jit::Target &target);
// gemm_fp8_mfma's heuristic variant for D of m x n: SCALING 0 per tensor, 1 row-wise, 2 block
// scales.
ChosenVariant gemm_fp8_mfma_variant(int scaling, int m, int n);
// Its variant for D of m x n x k on the lookup's device: the tuning table's winner (problem
// {SCALING}, extents fp8_gemm_tuning_extents, as gemm_fp8's on sm_90a), else the heuristic's.
ChosenVariant gemm_fp8_mfma_variant(const TuningLookup &lookup, int scaling, int m, int n, int k);
// Launches the variant of the shape (a per-thread plan: the table is asked on the first call of
// m's bucket, n and k) on already-checked operands.
void gemm_fp8_mfma(Runtime &rt, int scaling, BFloat16 *d, const std::uint8_t *a,
                   const float *scale_a, const std::uint8_t *b, const float *scale_b, int m, int n,
                   int k, Stream stream);

} // namespace kjit::ops::detail

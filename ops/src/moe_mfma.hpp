#pragma once
// fused_moe's grouped GEMM on AMD matrix cores (templates moe_mfma.hip): the variant, plan and
// launch that moe.cpp's detail::grouped_gemm_variant, make_grouped_plan and launch_grouped hand
// over to on gfx942 and gfx950.
#include "moe_gemm.hpp"

namespace kjit::ops::detail {

// Whether fused_moe's grouped GEMM runs as moe_gemm_mfma on the target (gfx942, gfx950).
bool moe_mfma_serves(const jit::Target &target);
// moe_gemm_mfma's variant for C [rows, n] over `pairs` pairs and `experts` experts on a device of
// `compute_units`.
template <Element T>
ChosenVariant moe_mfma_variant(bool gated, int pairs, int experts, int n, int compute_units);
GroupedPlan make_moe_mfma_plan(Runtime &rt, const ChosenVariant &variant);
// Launches the plan over every block the alignment of `rows` rows can take; the blocks past its
// totals[0] return at once.
template <Element T>
void launch_moe_mfma(const GroupedPlan &plan, T *c, const T *a, const T *w, std::size_t rows,
                     const MoeAlignment &alignment, int n, int k, Stream stream);

} // namespace kjit::ops::detail

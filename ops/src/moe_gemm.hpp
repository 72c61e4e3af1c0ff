#pragma once
// The grouped GEMM of fused_moe (templates moe_wgmma.hip), for benchmarks and tests that time or
// check one variant of it.
#include "kjit/ops/moe.hpp"
#include "plans.hpp"
#include "variants.hpp"

namespace kjit::ops::detail {

// The grouped GEMM's variant for C [rows, n] = A [rows, k] @ W[expert]^T over `pairs` pairs
// and `experts` experts on the lookup's device (moe_gemm_wgmma on sm_90a, moe_gemm_mfma on
// gfx942 and gfx950): the tuning table's winner for the shape (problem {GATED, T}, extents
// experts, k, m = rows_bucket(pairs), n), else the heuristic's. `gather`: A's rows are read
// from the tokens' rows by the kernel (moe_wgmma.hip's GATHER 1; never on AMD).
template <Element T>
ChosenVariant grouped_gemm_variant(const TuningLookup &lookup, bool gated, bool gather, int pairs,
                                   int experts, int n, int k);
// The same on the Runtime's default device (tuning_lookup).
template <Element T>
ChosenVariant grouped_gemm_variant(Runtime &rt, bool gated, bool gather, int pairs, int experts,
                                   int n, int k);

// fused_moe's FP8 grouped GEMM (moe_gemm_fp8, sm_90a) for C [rows, n] = A [rows, k] @
// W[expert]^T in e4m3: the tuning table's winner under the same problem and extents as
// grouped_gemm_variant's, else STAGES 6 and GROUP_M by the experts' tiles of rows.
template <Element T>
ChosenVariant moe_fp8_gemm_variant(const TuningLookup &lookup, bool gated, int pairs, int experts,
                                   int n, int k);

// The grouped GEMM's output columns per tile on sm_90a for `pairs` pairs (the plan's power-of-two
// bucket) over `experts` experts and n columns: `wide` (128 gated, 256 down), or half of it where
// the wide tiles leave multiprocessors idle, or, at the decode sizes where the gate-up GEMM
// gathers (up to 2048 pairs), where half-width tiles fill the last wave better by more than 5% of
// the waves' slots (BENCHMARKS.md, "fused_moe: decode tiles filling the last wave").
int grouped_block_n(std::int64_t pairs, int experts, int n, int wide, int multiprocessors);

// Whether fused_moe's gate-up GEMM on `target` reads the tokens' rows itself (GATHER 1, no
// moe_gather pass) for `pairs` pairs: up to 2048 pairs (rows_bucket), on sm_90a only (AMD's
// moe_gemm_mfma reads sorted rows at every size).
bool gate_up_gathers(const jit::Target &target, int pairs);

// Whether fused_moe with 16-bit weights takes its decode path on `target` for `tokens` tokens:
// moe_decode_gate_up and moe_decode_down (moe_routing.hip) in place of moe_align, the two
// grouped GEMMs and moe_combine. NVIDIA only (AMD keeps moe_gemm_mfma's path).
bool fused_moe_decodes(const jit::Target &target, int tokens);

// A variant compiled and allowed its shared memory, ready to launch.
struct GroupedPlan {
  const Kernel *kernel;
  int block_n;
  bool gated, gather;
  unsigned shared_bytes;
  bool epilogue = false; // C stored through shared memory by the copy engine (EPILOGUE 1)
};
GroupedPlan make_grouped_plan(Runtime &rt, const ChosenVariant &variant);
// `schedule`: null, or one device int through which a variant that does not gather takes its
// tiles in a dynamic order (zeroed on `stream` before the launch unless `schedule_zeroed`: a
// kernel before it zeroed it, as fused_moe's moe_align does; moe_wgmma.hip).
// `most_blocks`: the persistent grid's cap (0: one block per multiprocessor), which tests lower
// to make every block walk many tiles.
template <Element T>
void launch_grouped(const GroupedPlan &plan, T *c, const T *a, const T *w, std::size_t rows,
                    const MoeAlignment &alignment, int experts, int n, int k, int top_k,
                    int *schedule, Stream stream, int most_blocks = 0,
                    bool schedule_zeroed = false);

// Launches `variant` over the blocks `alignment` (of moe_align_rows(pairs, experts, 128) rows)
// holds; w is experts' weights, [experts * n, k] or, gated, [experts * 2n, k]. a is A [rows, k],
// or for a gathering variant the tokens' rows [tokens, k] of pairs token * top_k + slot.
template <Element T>
void grouped_gemm(Runtime &rt, const ChosenVariant &variant, T *c, const T *a, const T *w,
                  std::size_t rows, const MoeAlignment &alignment, int experts, int n, int k,
                  int top_k, int *schedule, Stream stream, int most_blocks = 0);

} // namespace kjit::ops::detail

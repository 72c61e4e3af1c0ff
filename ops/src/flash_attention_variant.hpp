#pragma once
// flash_attention's variant choice and a launch of any variant, for tests and benchmarks that
// compare its tunables (the wrapper launches flash_attention_variant's).
#include "kjit/ops/flash_attention.hpp"
#include "variants.hpp"

namespace kjit::ops::detail {

// The heuristic's variant for the call's type, head dim, mask and (under a mask) longest
// sequence on `target`: flash_attention on sm_90a, flash_attention_mfma on AMD (which refuses
// targets other than gfx942 and gfx950), flash_attention_mma elsewhere (which refuses targets
// before sm_80).
template <Element T>
ChosenVariant flash_attention_variant(const jit::Target &target, const AttentionShape &shape);

// Launches `variant` (of flash_attention, flash_attention_mma or flash_attention_mfma) as
// flash_attention() would, after the same checks. Throws Error(bad_argument) where the variant's
// HEAD_DIM or CAUSAL is not the shape's.
template <Element T>
void launch_flash_attention(Runtime &rt, const ChosenVariant &variant, T *out, const T *q,
                            const T *k, const T *v, const int *cu_seqlens_q,
                            const int *cu_seqlens_k, const AttentionShape &shape,
                            Stream stream = nullptr);

// flash_attention_paged's variant for the shape and page size on `target` (flash_attention with
// PAGED 1 or 2, which refuses targets other than sm_90a; on AMD flash_attention_mfma with PAGED
// 1, which refuses targets other than gfx942 and gfx950), and a launch of any PAGED variant as
// flash_attention_paged would, after the same checks. Throws Error(bad_argument) where the
// variant is not a PAGED flash_attention or flash_attention_mfma of the call's HEAD_DIM and CAUSAL.
template <Element T>
ChosenVariant
flash_attention_paged_variant(const AttentionShape &shape, int page_size,
                              const jit::Target &target = jit::Target::parse("sm_90a"));
template <Element T>
void launch_flash_attention_paged(Runtime &rt, const ChosenVariant &variant, T *out, const T *q,
                                  int q_heads, const PagedKvCache &cache,
                                  const PagedPrefillBatch &batch, bool causal, float scale,
                                  Stream stream = nullptr);

} // namespace kjit::ops::detail

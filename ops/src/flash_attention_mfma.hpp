#pragma once
// flash_attention on AMD matrix cores (flash_attention_mfma.hip, gfx942 and gfx950): the variant
// the wrapper launches there and the launch geometry of any of its variants. The kernel takes
// flash_attention_mma's arguments and grid (tiles of rows, q heads, sequences), then the pages'
// (block tables, max_blocks, page_size: null and zeros unpaged).
#include "kjit/ops/flash_attention.hpp"
#include "variants.hpp"

namespace kjit::ops::detail {

// The heuristic's variant of flash_attention_mfma for the call's type, head dim and mask; `paged`:
// PAGED 1, k and v from a paged cache (flash_attention_paged).
template <Element T>
ChosenVariant flash_attention_mfma_variant(const AttentionShape &shape, bool paged = false);

// What a variant of flash_attention_mfma launches with: rows of q a block takes, keys of a tile,
// threads (64-lane wavefronts); its LDS is static.
struct MfmaAttentionGeometry {
  int block_m, block_n, threads;
};
MfmaAttentionGeometry flash_attention_mfma_geometry(const ChosenVariant &variant);

} // namespace kjit::ops::detail

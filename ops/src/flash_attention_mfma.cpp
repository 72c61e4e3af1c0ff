#include "flash_attention_mfma.hpp"

#include "kjit/templates/library.hpp"

namespace kjit::ops::detail {

template <Element T>
ChosenVariant flash_attention_mfma_variant(const AttentionShape &shape, bool paged) {
  // Four waves of 32 rows, and key tiles that keep the staged k and v^T near 18 KiB of LDS at
  // either head dim (three blocks fit gfx942's 64 KiB): 64 keys at head dim 64, 32 at 128. Paged,
  // the same tiles: a page of 16 or 32 keys divides either.
  static const Template &tmpl = templates::find("flash_attention_mfma");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"HEAD_DIM", shape.head_dim},
           {"CAUSAL", shape.causal ? 1 : 0},
           {"BLOCK_N", shape.head_dim == 64 ? 64 : 32},
           {"WAVES", 4},
           {"PAGED", paged ? 1 : 0}}};
}

MfmaAttentionGeometry flash_attention_mfma_geometry(const ChosenVariant &variant) {
  const int waves = variant.integer("WAVES");
  return {32 * waves, variant.integer("BLOCK_N"), 64 * waves};
}

template ChosenVariant flash_attention_mfma_variant<Half>(const AttentionShape &, bool);
template ChosenVariant flash_attention_mfma_variant<BFloat16>(const AttentionShape &, bool);

} // namespace kjit::ops::detail

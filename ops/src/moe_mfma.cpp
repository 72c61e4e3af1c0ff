#include "moe_mfma.hpp"

#include "kjit/templates/library.hpp"
#include "launch.hpp"

namespace kjit::ops::detail {

namespace {

constexpr int mfma_block_m = 128, mfma_threads = 256; // moe_mfma.hip's rows and threads a block

} // namespace

bool moe_mfma_serves(const jit::Target &target) {
  return target.arch() == "gfx942" || target.arch() == "gfx950";
}

template <Element T>
ChosenVariant moe_mfma_variant(bool gated, int pairs, int experts, int n, int compute_units) {
  // 128 output columns a block where that still makes two blocks per compute unit, else 64.
  const long long blocks = divide_up(pairs, mfma_block_m) + std::min(experts, pairs);
  const int block_n = blocks * divide_up(n, 128) >= 2LL * compute_units ? 128 : 64;
  static const Template &tmpl = templates::find("moe_gemm_mfma");
  return {&tmpl, {{"T", element_name<T>()}, {"BLOCK_N", block_n}, {"GATED", gated ? 1 : 0}}};
}

GroupedPlan make_moe_mfma_plan(Runtime &rt, const ChosenVariant &variant) {
  // Sorted rows only (no gather); static LDS only: no dynamic shared memory to ask for.
  return {&rt.kernel(*variant.tmpl, variant.params), variant.integer("BLOCK_N"),
          variant.integer("GATED") == 1, /*gather=*/false, 0};
}

template <Element T>
void launch_moe_mfma(const GroupedPlan &plan, T *c, const T *a, const T *w, std::size_t rows,
                     const MoeAlignment &alignment, int n, int k, Stream stream) {
  const auto row_blocks = static_cast<unsigned>(rows / mfma_block_m);
  require(row_blocks <= 65535, "fused_moe", [&] {
    return std::to_string(rows) + " sorted rows need more than 65535 blocks of rows";
  });
  plan.kernel->launch({.grid = Dim3(divide_up(n, plan.block_n), row_blocks),
                       .block = mfma_threads,
                       .stream = stream},
                      c, a, w, alignment.block_experts, alignment.totals, n, k);
}

#define KJIT_INSTANTIATE(T)                                                                        \
  template ChosenVariant moe_mfma_variant<T>(bool, int, int, int, int);                            \
  template void launch_moe_mfma<T>(const GroupedPlan &, T *, const T *, const T *, std::size_t,    \
                                   const MoeAlignment &, int, int, Stream);
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops::detail

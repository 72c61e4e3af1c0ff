// The prebuilt levels serve kjit::ops: for the shapes each level promises, every variant the
// wrappers ask for (their own detail::*_variant functions, with 16-byte-aligned pointers as
// allocators give) is in that level's built-in set for the target, on NVIDIA (sm_90, 32-wide
// warps) and AMD (gfx90a, and gfx942 and gfx950 with their MFMA GEMM; 64-wide warps).
#include "kjit/ops/gemm.hpp"
#include "kjit/ops/quant.hpp"
#include "kjit/templates/sets.hpp"
#include "ops/src/launch.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace kjit::ops {
namespace {

// What the wrappers are given: pointers aligned to 16 bytes (never dereferenced here).
alignas(16) const std::byte aligned_storage[16] = {};
template <typename T> const T *aligned() { return reinterpret_cast<const T *>(aligned_storage); }

std::string describe(const detail::ChosenVariant &variant) {
  return variant.tmpl->name() + " " + variant.tmpl->bind(variant.params).canonical_params();
}

// The variants the built-in sets of `level` hold for `target`, as describe() names them.
std::set<std::string> level_variants(int level, const jit::Target &target) {
  std::set<std::string> all;
  for (const templates::VariantSet &set : templates::builtin_sets())
    if (set.level() == level)
      for (const templates::SetVariant &variant : set.variants())
        if (variant.for_target(target.vendor(), target.arch()))
          all.insert(variant.tmpl->name() + " " +
                     variant.tmpl->bind(variant.params).canonical_params());
  return all;
}

// Collects what the wrappers ask for on one target, and what of it a level lacks.
class Requests {
public:
  explicit Requests(const char *target) : target_(jit::Target::parse(target)) {}

  const jit::Target &target() const { return target_; }
  int warp() const { return target_.warp_size(); }

  void add(const detail::ChosenVariant &variant, const std::string &why) {
    requested_.emplace_back(describe(variant), why);
  }

  // "rms_norm HIDDEN=4096,T=half,THREADS=128,VEC=8 (Llama-3-8B hidden)" for each one the level
  // lacks.
  std::vector<std::string> missing_from(int level) const {
    const std::set<std::string> held = level_variants(level, target_);
    std::vector<std::string> missing;
    for (const auto &[variant, why] : requested_)
      if (!held.contains(variant))
        missing.push_back(variant + " (" + why + ")");
    return missing;
  }

  template <Element T> void rowwise(int length, const std::string &why) {
    for (const detail::RowwiseKernel &op :
         {detail::rms_norm_kernel, detail::fused_add_rms_norm_kernel})
      add(detail::rowwise_variant<T>(op, length, warp(), {aligned<T>()}).variant, why);
  }

  template <Element T> void quant_int8(int hidden, const std::string &why) {
    add(detail::quant_variant("dynamic_per_token_quant_int8", hidden, aligned<std::int8_t>(),
                              aligned<T>()),
        why);
  }

  template <Element T> void rotary(int head_size, const std::string &why) {
    for (RotaryStyle style : {RotaryStyle::neox, RotaryStyle::gptj})
      add(detail::rotary_variant(head_size, head_size, style, aligned<T>(), aligned<T>(),
                                 aligned<T>()),
          why);
  }

private:
  jit::Target target_;
  std::vector<std::pair<std::string, std::string>> requested_;
};

nlohmann::json inference_models() {
  std::ifstream in(KJIT_SETS_DIR "/inference.json");
  return nlohmann::json::parse(in).at("models");
}

template <Element T> void add_inference(Requests &requests) {
  const auto models = inference_models();
  ASSERT_GE(models.size(), 10u);
  for (const auto &[model, shape] : models.items()) {
    const std::string type(element_name<T>());
    const int hidden = shape.at("hidden"), intermediate = shape.at("intermediate"),
              head_size = shape.at("head_size");
    requests.rowwise<T>(hidden, model + " hidden " + type);
    for (const char *act : {"silu", "gelu"})
      requests.add(detail::gated_variant(act, intermediate, aligned<T>(), aligned<T>()),
                   model + " " + act + "_and_mul " + type);
    requests.quant_int8<T>(hidden, model + " hidden " + type);
    requests.quant_int8<T>(intermediate, model + " intermediate " + type);
    requests.rotary<T>(head_size, model + " head size " + type);
  }
  requests.rotary<T>(128, "head size 128 " + std::string(element_name<T>()));
}

template <Element T> void add_core(Requests &requests) {
  const std::string type(element_name<T>());
  for (int size : {1024, 2048, 4096, 8192}) {
    const std::string why = std::to_string(size) + " " + type;
    for (const detail::RowwiseKernel &op :
         {detail::rms_norm_kernel, detail::fused_add_rms_norm_kernel, detail::layer_norm_kernel,
          detail::softmax_kernel})
      requests.add(detail::rowwise_variant<T>(op, size, requests.warp(), {aligned<T>()}).variant,
                   why);
    for (const char *act : {"silu", "gelu", "gelu_tanh"})
      requests.add(detail::gated_variant(act, size, aligned<T>(), aligned<T>()), why);
    requests.quant_int8<T>(size, why);
    if (has_fp8_e4m3(requests.target()))
      requests.add(detail::quant_variant("dynamic_per_token_quant_fp8", size,
                                         aligned<std::uint8_t>(), aligned<T>()),
                   why);
  }
  for (const char *act : {"silu", "gelu", "gelu_tanh", "relu", "sigmoid"})
    requests.add(detail::activation_variant(act, aligned<T>(), aligned<T>()), type);
  for (int head_size : {64, 128})
    requests.rotary<T>(head_size, "head size " + std::to_string(head_size) + " " + type);
  // gemm() without tiles: small and large C, on tensor cores where the target has them.
  for (int mn : {256, 4096}) {
    const std::string why = "gemm " + std::to_string(mn) + " " + type;
    if (gemm_has_tensor_cores<T>(requests.target()))
      requests.add(requests.target().vendor() == Vendor::amd ? detail::gemm_mfma_variant<T>(mn, mn)
                                                             : detail::gemm_mma_variant<T>(mn, mn),
                   why);
    else
      requests.add(detail::gemm_variant<T>(gemm_tiles_for(mn, mn, mn)), why);
  }
}

// Asks the wrappers of sm_90 (32-wide warps), gfx90a, gfx942 and gfx950 (64-wide) for what `add`
// names, and fails naming each variant that `level` lacks.
template <typename Add> void expect_level_holds(int level, Add add) {
  for (const char *target : {"sm_90", "gfx90a", "gfx942", "gfx950"}) {
    Requests requests(target);
    add(requests);
    for (const std::string &variant : requests.missing_from(level))
      ADD_FAILURE() << "level " << level << " for " << target << " lacks " << variant;
  }
}

TEST(OpsSetsTest, TheInferenceLevelHoldsWhatTheWrappersPickForEveryModel) {
  expect_level_holds(2, [](Requests &requests) {
    add_inference<Half>(requests);
    add_inference<BFloat16>(requests);
  });
}

TEST(OpsSetsTest, TheCoreLevelHoldsWhatTheWrappersPickForItsSizes) {
  expect_level_holds(1, [](Requests &requests) {
    add_core<float>(requests);
    add_core<Half>(requests);
    add_core<BFloat16>(requests);
  });
}

TEST(OpsSetsTest, TheMinimalLevelHoldsLlama3_8BsNormAndGatedActivationInBFloat16) {
  expect_level_holds(3, [](Requests &requests) {
    requests.add(detail::rowwise_variant<BFloat16>(detail::rms_norm_kernel, 4096, requests.warp(),
                                                   {aligned<BFloat16>()})
                     .variant,
                 "rms_norm");
    requests.add(detail::gated_variant("silu", 14336, aligned<BFloat16>(), aligned<BFloat16>()),
                 "silu_and_mul");
  });
}

// The check itself: what a set lacks is named, with the shape that asked for it; and a variant
// for the other vendor does not count.
TEST(OpsSetsTest, AVariantTheSetLacksIsNamed) {
  Requests requests("gfx90a");
  requests.rowwise<Half>(4104, "an odd hidden");
  requests.add(detail::quant_variant("dynamic_per_token_quant_fp8", 4096, aligned<std::uint8_t>(),
                                     aligned<Half>()),
               "fp8, an NVIDIA-only item");
  EXPECT_EQ(requests.missing_from(1),
            (std::vector<std::string>{
                "rms_norm HIDDEN=4104,T=half,THREADS=256,VEC=8 (an odd hidden)",
                "fused_add_rms_norm HIDDEN=4104,T=half,THREADS=256,VEC=8 (an odd hidden)",
                "dynamic_per_token_quant_fp8 HIDDEN=4096,T=half,THREADS=64,VEC=8 (fp8, an "
                "NVIDIA-only item)"}));
}

} // namespace
} // namespace kjit::ops

// The operators' templates compile for gfx90a and the generic targets of RDNA 3 and 4 (hiprtc;
// the generic ones with Debian's device library, in the ROCm roots) and sm_90 (NVRTC) in the
// variants the operators pick, and the code object holds the kernel: read back as an ELF of the
// right machine with the kernel's symbol in it.
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/templates/library.hpp"
#include "ops/src/launch.hpp"
#include "tests/ops/compile_support.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace kjit::ops {
namespace {

struct VariantCase {
  std::string target;
  std::string name;
  ParamValues params;
};

std::string describe(const VariantCase &variant) {
  std::string text = variant.target + "_" + variant.name;
  for (const auto &[name, value] : variant.params)
    text += "_" + name + value.to_string();
  std::replace(text.begin(), text.end(), '-', '_'); // gfx11-generic: test names are identifiers
  return text;
}

// A row-wise template as the operators launch it for rows of `length` with aligned pointers.
template <Element T>
VariantCase rowwise(const std::string &target, const std::string &name, int length) {
  const void *aligned = reinterpret_cast<const void *>(std::uintptr_t{4096});
  const int warp = jit::Target::parse(target).warp_size();
  const detail::RowShape shape = detail::row_shape(sizeof(T), length, warp, {aligned});
  return {target,
          name,
          {{"T", element_name<T>()},
           {name == "softmax" ? "COLS" : "HIDDEN", length},
           {"VEC", shape.vec},
           {"THREADS", shape.threads}}};
}

template <Element T>
VariantCase activation(const std::string &target, const std::string &name, const std::string &act) {
  return {target, name, {{"ACT", act}, {"T", element_name<T>()}, {"VEC", 16 / sizeof(T)}}};
}

std::vector<VariantCase> variants() {
  std::vector<VariantCase> all;
  for (const std::string target : {"gfx90a", "sm_90", "gfx11-generic", "gfx12-generic"}) {
    for (const std::string name : {"rms_norm", "fused_add_rms_norm", "layer_norm", "softmax"}) {
      all.push_back(rowwise<float>(target, name, 8192));
      all.push_back(rowwise<Half>(target, name, 8192));
      all.push_back(rowwise<BFloat16>(target, name, 8192));
      all.push_back(rowwise<Half>(target, name, 127)); // scalar accesses, one warp per row
    }
    for (const std::string name : {"activation", "gated_activation"}) {
      all.push_back(activation<float>(target, name, "silu"));
      all.push_back(activation<Half>(target, name, "silu"));
      all.push_back(activation<BFloat16>(target, name, "silu"));
      all.push_back(activation<BFloat16>(target, name, "gelu"));
      all.push_back(activation<Half>(target, name, "gelu_tanh"));
    }
    all.push_back(activation<Half>(target, "activation", "relu"));
    all.push_back(activation<Half>(target, "activation", "sigmoid"));
  }
  return all;
}

class OpsTemplateCompiles : public ::testing::TestWithParam<VariantCase> {};

TEST_P(OpsTemplateCompiles, CodeObjectHoldsTheKernel) {
  const VariantCase &variant = GetParam();
  const jit::Target target = jit::Target::parse(variant.target);
  kjit::testing::TempDir dir;
  Runtime rt(kjit::testing::private_config(dir));
  try {
    rt.compiler(target.vendor()).check_supported(target);
  } catch (const Error &error) {
    // No compiler, or one that lists no generic target (ROCm 5.2).
    if (error.code() == Errc::compiler_unavailable || error.code() == Errc::unsupported_target)
      GTEST_SKIP() << error.summary();
    throw;
  }
  EXPECT_TRUE(compile_testing::holds_its_kernel(
      rt.compile(templates::find(variant.name), variant.params, target), target));
}

INSTANTIATE_TEST_SUITE_P(Defaults, OpsTemplateCompiles, ::testing::ValuesIn(variants()),
                         [](const auto &info) { return describe(info.param); });

} // namespace
} // namespace kjit::ops

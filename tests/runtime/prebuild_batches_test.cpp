// Prebuilding's plan (kjit/runtime/prebuild.hpp): batches and shards are a function of the
// variants alone, whatever their order.
#include "kjit/error.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "kjit/templates/library.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <random>

namespace kjit {
namespace {

std::vector<prebuild::TargetedInstance> scale_variants(int sizes,
                                                       const std::vector<std::string> &targets) {
  std::vector<prebuild::TargetedInstance> all;
  const Template &scale = templates::find("scale");
  for (const std::string &target : targets)
    for (const char *type : {"float", "half"})
      for (int n = 1; n <= sizes; ++n)
        all.push_back({scale.bind({{"T", type}, {"N", n}}), jit::Target::parse(target)});
  return all;
}

std::vector<std::string> describe(const std::vector<prebuild::Batch> &batches) {
  std::vector<std::string> out;
  for (const auto &batch : batches) {
    std::string text;
    for (const auto &variant : batch.variants)
      text += variant.describe() + ";";
    out.push_back(text);
  }
  return out;
}

TEST(PrebuildBatchesTest, OneTemplateAndTargetPerBatchBalancedAndIndependentOfOrder) {
  std::vector<prebuild::TargetedInstance> variants = scale_variants(50, {"gfx90a", "gfx1030"});
  variants.push_back(variants.front()); // a duplicate is built once
  const auto batches = prebuild::make_batches(variants);
  std::size_t total = 0;
  std::map<std::string, std::vector<std::size_t>> sizes; // per target
  for (const auto &batch : batches) {
    const auto &first = batch.variants.front();
    for (const auto &variant : batch.variants) {
      EXPECT_EQ(&variant.instance.source_template(), &first.instance.source_template());
      EXPECT_EQ(variant.target, first.target);
    }
    sizes[first.target.id()].push_back(batch.variants.size());
    total += batch.variants.size();
  }
  EXPECT_EQ(total, 200u);
  for (const auto &[target, each] : sizes) {
    EXPECT_EQ(each.size(), 8u) << target << ": 100 variants in eight programs";
    EXPECT_LE(*std::max_element(each.begin(), each.end()) -
                  *std::min_element(each.begin(), each.end()),
              1u);
  }
  std::shuffle(variants.begin(), variants.end(), std::mt19937(7));
  EXPECT_EQ(describe(prebuild::make_batches(variants)), describe(batches));

  const auto large = prebuild::make_batches(scale_variants(400, {"gfx90a"}));
  EXPECT_EQ(large.size(), 50u) << "at most sixteen variants to a program";
  const auto small = prebuild::make_batches(scale_variants(3, {"gfx90a"}));
  ASSERT_EQ(small.size(), 2u) << "at least four to a program where there are four";
  EXPECT_EQ(small[0].variants.size(), 3u);
}

TEST(PrebuildBatchesTest, TemplatesOfOneNameButOtherSourcesNeverShareAProgram) {
  const std::vector<ParamDecl> params = {{"N", ParamSchema::integer(1, 9)}};
  const Template a("k", "template <int N> __global__ void k() {}", params);
  const Template b("k", "template <int N> __global__ void k() { /* other */ }", params);
  const auto gfx90a = jit::Target::parse("gfx90a");
  const auto batches =
      prebuild::make_batches({{a.bind({{"N", 1}}), gfx90a}, {b.bind({{"N", 1}}), gfx90a}});
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_NE(&batches[0].variants[0].instance.source_template(),
            &batches[1].variants[0].instance.source_template());
}

TEST(PrebuildBatchesTest, CostliestBatchesAreHandedOutFirst) {
  const auto gfx90a = jit::Target::parse("gfx90a");
  // axpy sorts before gemm, so plan order puts its three batches of four first; one gemm variant
  // instantiates far more code than four axpy ones.
  std::vector<prebuild::TargetedInstance> variants;
  const Template &axpy = templates::find("axpy");
  for (const char *type : {"float", "half", "bfloat16"})
    for (int items : {1, 2, 4, 8})
      variants.push_back({axpy.bind({{"T", type}, {"ITEMS", items}}), gfx90a});
  const Template &gemm = templates::find("gemm");
  variants.push_back({gemm.bind({{"T", "float"},
                                 {"BLOCK_M", 64},
                                 {"BLOCK_N", 64},
                                 {"BLOCK_K", 16},
                                 {"THREAD_M", 4},
                                 {"THREAD_N", 4}}),
                      gfx90a});
  const auto batches = prebuild::make_batches(variants);
  ASSERT_EQ(batches.size(), 4u);
  ASSERT_EQ(batches.back().variants.front().instance.source_template().name(), "gemm");
  EXPECT_EQ(prebuild::longest_first(batches), (std::vector<std::size_t>{3, 0, 1, 2}))
      << "gemm first, the equal axpy batches in plan order";
}

TEST(PrebuildShardTest, SharesAreDisjointCoverTheWholeSetAndIgnoreOrder) {
  std::vector<prebuild::TargetedInstance> variants = scale_variants(100, {"gfx90a", "sm_90"});
  constexpr std::size_t shares = 8;
  std::map<std::string, int> owners;
  std::vector<std::size_t> sizes(shares, 0);
  for (std::size_t k = 0; k < shares; ++k)
    for (const auto &variant : variants)
      if (prebuild::Shard{k, shares}.holds(variant)) {
        ++owners[variant.describe()];
        ++sizes[k];
      }
  EXPECT_EQ(owners.size(), variants.size());
  for (const auto &[variant, count] : owners)
    EXPECT_EQ(count, 1) << variant;
  for (std::size_t size : sizes)
    EXPECT_GT(size, 0u) << "400 variants leave no share of eight empty";
  std::shuffle(variants.begin(), variants.end(), std::mt19937(3));
  for (const auto &variant : variants)
    EXPECT_TRUE((prebuild::Shard{0, 1}.holds(variant)));
}

TEST(PrebuildShardTest, ParsesKOfNAndRefusesAnythingElse) {
  const prebuild::Shard shard = prebuild::Shard::parse("3/8");
  EXPECT_EQ(shard.index, 2u);
  EXPECT_EQ(shard.count, 8u);
  for (const char *bad : {"0/8", "9/8", "8", "/8", "1/", "a/b", "1/8x", "-1/8", "1/0", ""}) {
    try {
      (void)prebuild::Shard::parse(bad);
      ADD_FAILURE() << bad;
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_usage) << bad;
      EXPECT_NE(error.summary().find("K/N"), std::string::npos) << error.summary();
    }
  }
}

} // namespace
} // namespace kjit

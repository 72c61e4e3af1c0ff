// The mixture-of-experts routing kernels (moe_routing.hip) run on the CPU with a warp of 32
// lanes (tests/ops/kernel_emulation.hpp), in the launch shapes kjit::ops picks, against the
// references: ids and the alignment exactly, weights to float's rounding. The emulator meets the
// whole block at every shuffle, so each warp must run as many shuffles as the others: the token
// counts fill whole blocks and the pair counts whole warp segments.
#include "tests/ops/kernel_emulation.hpp"

#include "kjit/ops/moe.hpp"
#include "tests/ops/gpu_support.hpp"

#include <gtest/gtest.h>
#include <random>

#define KJIT_WARP_SIZE 32
namespace {
// clang-format off
#include "templates/prelude/kjit/prelude.h"
#include "templates/kernels/moe_routing.hip"
// clang-format on

using ::kjit::ops::BFloat16;
using ::kjit::ops::Element;
using ::kjit::ops::TopkOptions;
namespace reference = ::kjit::ops::reference;
namespace emulation = ::kjit::emulation;

#include "tests/ops/emulated_buffer.hpp"

constexpr int tokens_per_block = 256 / KJIT_WARP_SIZE; // moe_topk's launch

template <Element T, int EXPERTS, int TOPK, int SCORING, int GROUPS, int TOPK_GROUP>
void check_topk(int tokens, bool with_bias, const TopkOptions &options, unsigned seed) {
  using K = typename KernelType<T>::type;
  std::mt19937 rng(seed);
  std::vector<T> logits =
      ::kjit::ops::gpu_testing::random_elements<T>(std::size_t(tokens) * EXPERTS, rng, -4, 4);
  // Ties: token 0's experts all equal, token 1's first half equal.
  for (int e = 0; e < EXPERTS; ++e) {
    logits[e] = ::kjit::ops::from_double<T>(1.0);
    if (e < EXPERTS / 2)
      logits[EXPERTS + e] = ::kjit::ops::from_double<T>(2.0);
  }
  std::vector<float> bias;
  if (with_bias)
    for (int e = 0; e < EXPERTS; ++e)
      bias.push_back(static_cast<float>(e % 3) * 0.125f);
  Buffer<T> in(logits);
  std::vector<float> weights(std::size_t(tokens) * TOPK, NAN);
  std::vector<int> ids(weights.size(), -7);
  emulation::launch({static_cast<unsigned>(tokens / tokens_per_block)}, {256}, [&] {
    moe_topk<K, EXPERTS, TOPK, SCORING, GROUPS, TOPK_GROUP>(
        weights.data(), ids.data(), in.data(), with_bias ? bias.data() : nullptr, tokens,
        options.renormalize ? 1 : 0, options.scale);
  });
  const reference::Routing expected =
      reference::moe_topk<T>(logits, bias, tokens, EXPERTS, TOPK, options);
  EXPECT_EQ(ids, expected.ids);
  for (std::size_t i = 0; i < weights.size(); ++i)
    EXPECT_NEAR(weights[i], expected.weights[i], 1e-6 * options.scale) << i;
}

TEST(EmulatedMoeTopk, SoftmaxMatchesTheReferenceWithTiesToTheLowerIndex) {
  check_topk<float, 8, 2, 0, 1, 1>(16, false, {}, 1);
  check_topk<BFloat16, 64, 6, 0, 1, 1>(16, false, {.renormalize = false}, 2);
  check_topk<BFloat16, 60, 4, 0, 1, 1>(8, false, {}, 3); // experts not a multiple of the warp
}

TEST(EmulatedMoeTopk, GroupedSigmoidWithBiasMatchesTheReference) {
  const TopkOptions deepseek{.scoring = TopkOptions::Scoring::sigmoid,
                             .groups = 8,
                             .top_groups = 4,
                             .renormalize = true,
                             .scale = 2.5f};
  check_topk<BFloat16, 256, 8, 1, 8, 4>(16, true, deepseek, 4);
  check_topk<float, 64, 6, 1, 4, 2>(
      8, false, {.scoring = TopkOptions::Scoring::sigmoid, .groups = 4, .top_groups = 2}, 5);
}

template <int EXPERTS, int BLOCK_M> void check_align(const std::vector<int> &ids) {
  const int pairs = static_cast<int>(ids.size());
  const std::size_t rows = ::kjit::ops::moe_align_rows(pairs, EXPERTS, BLOCK_M);
  std::vector<int> sorted(rows, -7), blocks(rows / BLOCK_M, -7), positions(pairs, -7),
      totals(2, -7), schedule(2, -7);
  emulation::launch({EXPERTS}, {1024}, [&] { // one block per expert (ops/src/moe.cpp)
    moe_align<EXPERTS, BLOCK_M>(sorted.data(), blocks.data(), positions.data(), totals.data(),
                                ids.data(), pairs, schedule.data());
  });
  EXPECT_EQ(schedule, std::vector<int>(2, 0)); // fused_moe's GEMMs' tile counters
  std::vector<int> valid_ids = ids; // the reference refuses ids out of range: they go nowhere
  int invalid = 0;
  for (int &id : valid_ids)
    if (id < 0 || id >= EXPERTS)
      ++invalid, id = EXPERTS; // an expert past the last: sorted after every real one
  const reference::Alignment expected = reference::moe_align(valid_ids, EXPERTS + 1, BLOCK_M);
  std::size_t used = 0; // the rows of real experts
  while (used < expected.block_experts.size() && expected.block_experts[used] < EXPERTS)
    ++used;
  ASSERT_EQ(totals[0], static_cast<int>(used));
  EXPECT_EQ(totals[1], invalid);
  EXPECT_EQ(std::vector<int>(sorted.begin(), sorted.begin() + used * BLOCK_M),
            std::vector<int>(expected.sorted_pairs.begin(),
                             expected.sorted_pairs.begin() + used * BLOCK_M));
  EXPECT_EQ(
      std::vector<int>(blocks.begin(), blocks.begin() + used),
      std::vector<int>(expected.block_experts.begin(), expected.block_experts.begin() + used));
  std::vector<int> expected_positions = expected.pair_positions;
  for (int p = 0; p < pairs; ++p)
    if (valid_ids[p] == EXPERTS)
      expected_positions[p] = -1;
  EXPECT_EQ(positions, expected_positions);
}

// Two experts of eight take every pair (fused_moe's GPU test "experts 0 and 5 only"): the four
// between them, and the two after, have no rows.
TEST(EmulatedMoeAlign, TwoExpertsOfEightTakeEveryPair) {
  std::mt19937 rng(9);
  std::vector<int> ids(32 * 13);
  for (std::size_t p = 0; p < ids.size(); p += 2) {
    const bool swap = rng() % 2 == 1;
    ids[p] = swap ? 5 : 0;
    ids[p + 1] = swap ? 0 : 5;
  }
  check_align<8, 128>(ids);
}

TEST(EmulatedMoeAlign, SortsStablyPadsAndSkipsExpertsWithoutPairs) {
  std::mt19937 rng(6);
  // Ragged counts over 8 experts of which 2 and 5 get nothing; 64 pairs per warp segment.
  std::vector<int> ids(32 * 64);
  std::discrete_distribution<int> skewed({30, 10, 0, 5, 1, 0, 3, 51});
  for (int &id : ids)
    id = skewed(rng);
  check_align<8, 128>(ids);
  check_align<8, 16>(ids);
}

// 40 experts: more than a warp's lanes (each lane scans two in the starts' sum); few blocks
// otherwise (one per expert, every emulated block meeting 1024 threads at each shuffle).
TEST(EmulatedMoeAlign, OneExpertTakingEveryPairAndIdsOutOfRangeRoutedNowhere) {
  check_align<40, 128>(std::vector<int>(32 * 3, 37));
  std::vector<int> ids(32 * 2);
  for (std::size_t p = 0; p < ids.size(); ++p)
    ids[p] = p % 7 == 0 ? -1 : p % 11 == 0 ? 8 : static_cast<int>(p % 5);
  check_align<8, 16>(ids);
}

TEST(EmulatedMoeGatherCombine, GatherSortsRowsAndCombineSumsTheWeightedOutputs) {
  using K = typename KernelType<BFloat16>::type;
  constexpr int tokens = 4, top_k = 2, hidden = 16, block_m = 16, experts = 4;
  const std::vector<int> ids = {3, 0, 0, 3, 1, -1, 0, 3}; // token 2 routes one slot nowhere
  std::mt19937 rng(7);
  const std::vector<BFloat16> x =
      ::kjit::ops::gpu_testing::random_elements<BFloat16>(std::size_t(tokens) * hidden, rng, -2, 2);
  std::vector<int> valid = ids;
  valid[5] = experts;
  const reference::Alignment a = reference::moe_align(valid, experts + 1, block_m);
  std::vector<int> sorted = a.sorted_pairs, positions = a.pair_positions;
  positions[5] = -1;
  const int used = static_cast<int>(sorted.size()) / block_m - 1; // without the "nowhere" run
  std::vector<int> totals = {used, 1};
  Buffer<BFloat16> in(x), gathered = Buffer<BFloat16>::poisoned(sorted.size() * hidden);
  emulation::launch({static_cast<unsigned>(used * block_m)}, {128}, [&] {
    moe_gather<K, 8>(gathered.data(), in.data(), sorted.data(), totals.data(), top_k, hidden,
                     block_m);
  });
  // A pair's row is its token's row; a padding row keeps its poison (moe_gather does not write
  // it: the grouped GEMM reads it into its own padding row only).
  const std::vector<BFloat16> rows = gathered.values(std::size_t(used) * block_m * hidden);
  int padding = 0;
  for (int r = 0; r < used * block_m; ++r) {
    padding += sorted[r] < 0;
    for (int h = 0; h < hidden; ++h) {
      const BFloat16 got = rows[r * hidden + h];
      if (sorted[r] < 0)
        ASSERT_TRUE(::kjit::testing::is_poison(got)) << r << " " << h;
      else
        ASSERT_EQ(::kjit::ops::to_double(got),
                  ::kjit::ops::to_double(x[sorted[r] / top_k * hidden + h]))
            << r << " " << h;
    }
  }
  ASSERT_GT(padding, 0); // the check above saw padding rows
  // Combine the gathered rows themselves as the experts' outputs: each token gets its own row
  // times the sum of its routed weights.
  const std::vector<float> weights = {0.5f, 0.25f, 1.0f, 2.0f, 0.75f, 8.0f, 0.125f, 0.375f};
  Buffer<BFloat16> out = Buffer<BFloat16>::poisoned(std::size_t(tokens) * hidden);
  emulation::launch({tokens}, {128}, [&] {
    moe_combine<K, 8>(out.data(), gathered.data(), weights.data(), positions.data(), top_k, hidden);
  });
  const std::vector<BFloat16> combined = out.values(std::size_t(tokens) * hidden);
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < hidden; ++h) {
      double factor = 0;
      for (int s = 0; s < top_k; ++s)
        factor += positions[t * top_k + s] < 0 ? 0.0 : weights[t * top_k + s];
      const double expected = factor * ::kjit::ops::to_double(x[t * hidden + h]);
      EXPECT_NEAR(::kjit::ops::to_double(combined[t * hidden + h]), expected,
                  std::fabs(expected) * 0x1p-8)
          << t << " " << h;
    }
  EXPECT_TRUE(out.guard_intact(std::size_t(tokens) * hidden));
}

} // namespace

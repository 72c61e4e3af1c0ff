// The mixture-of-experts operators on the device: routing exactly against the reference, and
// fused_moe against the double-precision reference within the bound of its roundings, into a
// poisoned output. Small layers (ragged hidden and inter) are checked whole; the Mixtral-like
// and fine-grained layers at 1, 16, 256 and 4096 tokens on three of their tokens (the
// reference's cost). fused_moe with FP8 weights likewise (MoeFp8GpuTest), on smaller layers of
// both kinds: its weights ~N(0, 0.02) quantised per 128 x 128 block, scales amax / 448.
#include "kjit/ops/quant.hpp"
#include "kjit/runtime/tuner.hpp"
#include "ops/src/moe_gemm.hpp"
#include "ops/src/plans.hpp"
#include "tests/ops/gpu_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

template <Element T> class MoeGpuTest : public OpsGpuTest {
protected:
  void SetUp() override {
    OpsGpuTest::SetUp();
    if (IsSkipped())
      return;
    const jit::Target &target = device().target();
    if (target.id() != "sm_90a" && target.arch() != "gfx942" && target.arch() != "gfx950")
      GTEST_SKIP() << "fused_moe runs on sm_90a, gfx942 and gfx950 only; this device is "
                   << target.id();
  }

  // Values in [-scale, scale) from a hash of the index: fast for billions of weights.
  static std::vector<T> hashed(std::size_t count, std::uint64_t seed, double scale) {
    std::vector<T> values(count);
    for (std::size_t i = 0; i < count; ++i) {
      std::uint64_t h = (i + seed * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
      h ^= h >> 31;
      h *= 0x94d049bb133111ebull;
      h ^= h >> 29;
      values[i] = from_double<T>((static_cast<double>(h >> 40) / (1 << 23) - 1.0) * scale);
    }
    return values;
  }

  struct Layer {
    int experts, hidden, inter;
    std::vector<T> w13, w2;
    DeviceBuffer w13_device, w2_device;
  };
  Layer make_layer(int experts, int hidden, int inter) {
    std::vector<T> w13 =
        hashed(std::size_t(experts) * 2 * inter * hidden, 1, 1.0 / std::sqrt(hidden));
    std::vector<T> w2 = hashed(std::size_t(experts) * hidden * inter, 2, 1.0 / std::sqrt(inter));
    DeviceBuffer w13_device = this->template upload<T>(w13);
    DeviceBuffer w2_device = this->template upload<T>(w2);
    return Layer{experts,
                 hidden,
                 inter,
                 std::move(w13),
                 std::move(w2),
                 std::move(w13_device),
                 std::move(w2_device)};
  }

  DeviceBuffer upload_bytes(const void *data, std::size_t bytes) {
    DeviceBuffer buffer = this->device().allocate(bytes);
    buffer.write(data, bytes);
    return buffer;
  }

  // A layer call's tensors on the device: x of `tokens` hashed rows (kept on the host too), the
  // routing, and a poisoned output.
  struct Tokens {
    int tokens, hidden;
    std::vector<T> x;
    DeviceBuffer x_device, ids, weights, out;
  };
  Tokens make_tokens(int tokens, int hidden, const std::vector<int> &ids,
                     const std::vector<float> &weights) {
    std::vector<T> x = hashed(std::size_t(tokens) * hidden, 3 + tokens, 1.0);
    DeviceBuffer x_device = this->template upload<T>(x);
    return {tokens,
            hidden,
            std::move(x),
            std::move(x_device),
            upload_bytes(ids.data(), ids.size() * sizeof(int)),
            upload_bytes(weights.data(), weights.size() * sizeof(float)),
            this->template poisoned<T>(std::size_t(tokens) * hidden)};
  }

  // fused_moe of `layer` (MoeWeights or MoeWeightsFp8) on `in`, with a poisoned workspace.
  template <typename Weights>
  void run_layer(Tokens &in, int top_k, const Weights &w, const FusedMoeOptions &options = {}) {
    const std::size_t bytes = fused_moe_workspace_bytes<T>(in.tokens, top_k, w);
    DeviceBuffer workspace = this->template poisoned<float>(bytes / sizeof(float));
    fused_moe<T>(runtime(), in.out.template as<T>(), in.x_device.template as<const T>(),
                 in.weights.template as<const float>(), in.ids.template as<const int>(), in.tokens,
                 top_k, w, workspace.data(), bytes, nullptr, options);
  }

  // fused_moe with `validate` on ids holding one out of range: Error(bad_argument) with
  // `summary`, and the output still all poison (nothing launched).
  template <typename Weights>
  void expect_refused(Tokens &in, int top_k, const Weights &w, const std::string &summary) {
    try {
      run_layer(in, top_k, w, {.validate = true});
      ADD_FAILURE() << "no kjit::Error thrown; expected '" << summary << "'";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument) << error.what();
      EXPECT_EQ(error.summary(), summary);
    }
    const std::vector<T> got =
        this->template download<T>(in.out, std::size_t(in.tokens) * in.hidden);
    EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](const T &value) {
      return kjit::testing::is_poison(value);
    })) << "fused_moe wrote its output before refusing the ids";
  }

  MoeWeights<T> weights_of(const Layer &layer) const {
    return {layer.w13_device.template as<const T>(), layer.w2_device.template as<const T>(),
            layer.experts, layer.hidden, layer.inter};
  }

  // fused_moe on tokens of x routed by ids and weights, checked on `check` (every token where
  // empty) against the reference.
  void check_layer(const Layer &layer, int tokens, int top_k, const std::vector<int> &ids,
                   const std::vector<float> &weights, std::vector<int> check,
                   const std::string &what, const FusedMoeOptions &options = {}) {
    SCOPED_TRACE(what + ": " + std::to_string(tokens) + " tokens, experts " +
                 std::to_string(layer.experts) + ", top " + std::to_string(top_k) + ", hidden " +
                 std::to_string(layer.hidden) + ", inter " + std::to_string(layer.inter));
    Tokens in = make_tokens(tokens, layer.hidden, ids, weights);
    run_layer(in, top_k, weights_of(layer), options);
    const std::vector<T> &x = in.x;
    const std::vector<T> got =
        this->template download<T>(in.out, std::size_t(tokens) * layer.hidden);
    if (check.empty()) {
      check.resize(tokens);
      std::iota(check.begin(), check.end(), 0);
    }
    const reference::Layer expected =
        reference::fused_moe<T>(x, weights, ids, top_k, layer.w13, layer.w2, layer.experts,
                                layer.hidden, layer.inter, check);
    // The gated intermediate and each expert's output round to T (half a unit each, relative
    // to the magnitude), the sum once more: twice that.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < check.size(); ++i)
      for (int h = 0; h < layer.hidden; ++h) {
        const std::size_t r = i * layer.hidden + h;
        const double value = to_double(got[std::size_t(check[i]) * layer.hidden + h]);
        const double bound =
            2 * epsilon<T>() * expected.magnitude[r] + epsilon<T>() * std::fabs(expected.out[r]);
        if (!(std::fabs(value - expected.out[r]) <= bound) && ++wrong <= 5)
          ADD_FAILURE() << "token " << check[i] << " [" << h << "] got " << value << ", expected "
                        << expected.out[r] << " within " << bound;
      }
    EXPECT_EQ(wrong, 0u);
  }

  // top_k distinct experts per token, drawn from `allowed`, with weights in [0.1, 1).
  static void random_routing(int tokens, int top_k, const std::vector<int> &allowed,
                             std::uint32_t seed, std::vector<int> &ids,
                             std::vector<float> &weights) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> weight(0.1f, 1.0f);
    ids.clear();
    weights.clear();
    for (int t = 0; t < tokens; ++t) {
      std::vector<int> pool = allowed;
      std::shuffle(pool.begin(), pool.end(), rng);
      for (int s = 0; s < top_k; ++s) {
        ids.push_back(pool[s]);
        weights.push_back(weight(rng));
      }
    }
  }
};
using HalfTypes = ::testing::Types<Half, BFloat16>;
TYPED_TEST_SUITE(MoeGpuTest, HalfTypes);

TYPED_TEST(MoeGpuTest,
           SmallLayersWithRaggedSizesEmptyExpertsOneExpertForAllAndTokensRoutedNowhere) {
  for (const auto &[hidden, inter] : {std::pair{256, 384}, {136, 200}}) {
    const auto layer = this->make_layer(8, hidden, inter);
    std::vector<int> all(8), ids;
    std::iota(all.begin(), all.end(), 0);
    std::vector<float> weights;
    // 1100 tokens: 2200 pairs, past max_gathering_pairs: a moe_gather pass and TMA reads.
    for (int tokens : {1, 16, 256, 300, 1100}) {
      this->random_routing(tokens, 2, all, tokens, ids, weights);
      this->check_layer(layer, tokens, 2, ids, weights, {}, "ragged counts");
    }
    // One token, fused_moe's decode path: one expert in both slots, a slot routed nowhere, none.
    for (const std::vector<int> &one : {std::vector<int>{3, 3}, {-1, 4}, {-1, 8}})
      this->check_layer(layer, 1, 2, one, {0.75f, 0.5f}, {}, "one token");
    this->random_routing(200, 2, {0, 5}, 9, ids, weights);
    this->check_layer(layer, 200, 2, ids, weights, {}, "experts 0 and 5 only");
    this->random_routing(130, 2, {1, 2, 4, 6, 7}, 10, ids, weights);
    for (int t = 0; t < 130; ++t)
      ids[t * 2] = 3; // expert 3 in every token's first slot
    this->check_layer(layer, 130, 2, ids, weights, {}, "expert 3 takes every token");
    this->random_routing(40, 2, all, 11, ids, weights);
    for (int t = 0; t < 40; t += 3)
      ids[t * 2] = -1, ids[t * 2 + 1] = t % 2 == 0 ? 8 : -5; // routed nowhere at all
    ids[3] = -1;                                             // token 1: one slot only
    this->check_layer(layer, 40, 2, ids, weights, {}, "tokens routed nowhere");
  }
}

// moe_align on the device (one block per expert; the warps' ranks by ballot, which the CPU
// emulation in moe_emulated_test.cpp does not take) exactly against the reference, into poisoned
// outputs: the fine-grained layer's 24,576 pairs and the Mixtral-like layer's 8,192 at 4096
// tokens, ragged counts with experts left empty at a tile of 16 rows, one expert taking every
// pair, ids out of range routed nowhere, and three pairs among 256 experts.
TYPED_TEST(MoeGpuTest, AlignMatchesTheReferenceExactlyOnRaggedEmptyAndFullExperts) {
  struct Case {
    const char *what;
    int experts, block_m;
    std::vector<int> ids;
  };
  std::mt19937 rng(13);
  const auto drawn = [&](int pairs, std::discrete_distribution<int> expert) {
    std::vector<int> ids(pairs);
    for (int &id : ids)
      id = expert(rng);
    return ids;
  };
  std::vector<double> uniform64(64, 1.0), uniform8(8, 1.0);
  std::vector<double> ragged = {30, 10, 0, 5, 1, 0, 3, 51, 0, 0, 0, 7, 2, 0, 0, 40};
  std::vector<int> out_of_range = drawn(3001, {uniform64.begin(), uniform64.end()});
  for (std::size_t p = 0; p < out_of_range.size(); p += 7)
    out_of_range[p] = p % 2 == 0 ? -1 : 64;
  const std::vector<Case> cases = {
      {"fine-grained, 4096 tokens", 64, 128, drawn(24576, {uniform64.begin(), uniform64.end()})},
      {"Mixtral-like, 4096 tokens", 8, 128, drawn(8192, {uniform8.begin(), uniform8.end()})},
      {"ragged, empty experts", 16, 16, drawn(5000, {ragged.begin(), ragged.end()})},
      {"one expert takes every pair", 64, 128, std::vector<int>(4999, 63)},
      {"ids out of range", 64, 64, out_of_range},
      {"three pairs, 256 experts", 256, 128, {255, 0, 255}}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    const int pairs = static_cast<int>(c.ids.size());
    const std::size_t rows = moe_align_rows(pairs, c.experts, c.block_m);
    const std::vector<int> poison(rows, -7);
    DeviceBuffer ids = this->upload_bytes(c.ids.data(), c.ids.size() * sizeof(int));
    DeviceBuffer sorted = this->upload_bytes(poison.data(), rows * sizeof(int)),
                 blocks = this->upload_bytes(poison.data(), rows / c.block_m * sizeof(int)),
                 positions = this->upload_bytes(poison.data(), pairs * sizeof(int)),
                 totals = this->upload_bytes(poison.data(), 2 * sizeof(int));
    moe_align(this->runtime(),
              {sorted.as<int>(), blocks.as<int>(), positions.as<int>(), totals.as<int>()},
              ids.as<const int>(), pairs, c.experts, c.block_m);
    std::vector<int> valid = c.ids; // the reference refuses ids out of range: sorted last
    int invalid = 0;
    for (int &id : valid)
      if (id < 0 || id >= c.experts)
        ++invalid, id = c.experts;
    const reference::Alignment expected = reference::moe_align(valid, c.experts + 1, c.block_m);
    std::size_t used = 0; // the tiles of real experts
    while (used < expected.block_experts.size() && expected.block_experts[used] < c.experts)
      ++used;
    std::vector<int> got_totals(2), got_sorted(used * c.block_m), got_blocks(used),
        got_positions(pairs);
    totals.read(got_totals.data(), 2 * sizeof(int));
    sorted.read(got_sorted.data(), got_sorted.size() * sizeof(int));
    blocks.read(got_blocks.data(), got_blocks.size() * sizeof(int));
    positions.read(got_positions.data(), got_positions.size() * sizeof(int));
    EXPECT_EQ(got_totals, (std::vector<int>{static_cast<int>(used), invalid}));
    EXPECT_EQ(got_sorted, std::vector<int>(expected.sorted_pairs.begin(),
                                           expected.sorted_pairs.begin() + used * c.block_m));
    EXPECT_EQ(got_blocks, std::vector<int>(expected.block_experts.begin(),
                                           expected.block_experts.begin() + used));
    std::vector<int> expected_positions = expected.pair_positions;
    for (int p = 0; p < pairs; ++p)
      if (valid[p] == c.experts)
        expected_positions[p] = -1;
    EXPECT_EQ(got_positions, expected_positions);
  }
}

// The grouped GEMM alone (detail::grouped_gemm, the heuristic's variants): the gate-up
// projection gathering the tokens' rows (GATHER 1) and reading sorted rows by TMA in the dynamic
// tile order (padding rows poisoned: no row of a tile may leak into another), then the down
// projection on its output, each against double precision: gated[p, j] = silu(x . gate_j) *
// (x . up_j) for pair p's token, y[p, i] = gated[p] . w2_i (the device's gated rows, as
// rounded). Bounds: eps(T) of the sum of |terms| per product, the silu_and_mul's product twice
// that, and the rounding of the result. Inter 320 is not a multiple of 128. Each way with the
// consumers sharing each tile (PINGPONG 0) or taking whole tiles in turns (PINGPONG 1), and C
// stored from registers (EPILOGUE 0) or through shared memory by the copy engine (EPILOGUE 1,
// whose boxes of 64 columns end past inter's 320 in the last tile of 128). SKIP_PADDING 1 (the
// default) against 0, and the gate-up GEMM skipping while the down GEMM does not: the down GEMM
// then reads the gated rows' poisoned padding rows, which must reach no pair's row. Two
// routings: random with ragged counts and an empty expert, and exact counts whose last tiles
// hold 72, 64, 65, 1, 128 (full), 1 and 45 real rows; where SKIP_PADDING 1 takes a tile's rows
// 64-127 for padding (all -1 in sorted_pairs), h and y keep their poison there (the skip ran).
TYPED_TEST(MoeGpuTest, GroupedGemmGatheringOrReadingSortedRowsWithPoisonedPadding) {
  using T = TypeParam;
  if (this->device().target().id() != "sm_90a")
    GTEST_SKIP() << "moe_gemm_wgmma runs on sm_90a only; this device is "
                 << this->device().target().id();
  constexpr int experts = 8, top_k = 2, tokens = 700, hidden = 256, inter = 320;
  const auto layer = this->make_layer(experts, hidden, inter);
  std::vector<int> random_ids, all(experts);
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> weights;
  this->random_routing(tokens, top_k, all, 12, random_ids, weights);
  for (int t = 0; t < tokens; t += 5)
    random_ids[t * top_k] = 6; // expert 6 takes many rows (ragged counts), expert 7 none:
  for (int &id : random_ids)
    id = id == 7 ? 1 : id;
  const int pairs = tokens * top_k;
  // Pairs per expert whose last tiles of 128 rows hold 72, 64, 65, 1, 128, none, 1 and 45 rows.
  std::vector<int> exact_ids;
  for (const auto &[expert, count] :
       {std::pair{0, 200}, {1, 64}, {2, 65}, {3, 1}, {4, 128}, {5, 0}, {6, 129}, {7, 813}})
    exact_ids.insert(exact_ids.end(), count, expert);
  ASSERT_EQ(exact_ids.size(), std::size_t(pairs));
  std::shuffle(exact_ids.begin(), exact_ids.end(), std::mt19937(5));
  for (const bool exact : {false, true}) {
    SCOPED_TRACE(exact ? "exact counts" : "random routing");
    const std::vector<int> &ids = exact ? exact_ids : random_ids;
    typename MoeGpuTest<T>::Tokens in = this->make_tokens(tokens, hidden, ids, weights);
    const std::vector<T> &x = in.x;
    // Each pair's products in double: gated [pairs, inter] and its bound.
    std::vector<double> gated(std::size_t(pairs) * inter), gated_bound(gated.size());
    for (int p = 0; p < pairs; ++p)
      for (int j = 0; j < inter; ++j) {
        double g = 0, u = 0, g_abs = 0, u_abs = 0;
        const std::size_t gate = (std::size_t(ids[p]) * 2 * inter + j) * hidden;
        const std::size_t up = gate + std::size_t(inter) * hidden;
        for (int h = 0; h < hidden; ++h) {
          const double a = to_double(x[std::size_t(p / top_k) * hidden + h]);
          g += a * to_double(layer.w13[gate + h]);
          u += a * to_double(layer.w13[up + h]);
          g_abs += std::fabs(a * to_double(layer.w13[gate + h]));
          u_abs += std::fabs(a * to_double(layer.w13[up + h]));
        }
        const double silu = g / (1 + std::exp(-g));
        gated[std::size_t(p) * inter + j] = silu * u;
        gated_bound[std::size_t(p) * inter + j] =
            2 * epsilon<T>() * (g_abs * std::fabs(u) + std::fabs(silu) * u_abs) +
            epsilon<T>() * std::fabs(silu * u);
      }
    const std::size_t rows = moe_align_rows(pairs, experts, 128);
    DeviceBuffer sorted = this->device().allocate(rows * 4),
                 blocks = this->device().allocate(rows / 128 * 4),
                 positions = this->device().allocate(std::size_t(pairs) * 4),
                 totals = this->device().allocate(8), schedule = this->device().allocate(4);
    const MoeAlignment alignment{sorted.as<int>(), blocks.as<int>(), positions.as<int>(),
                                 totals.as<int>()};
    Runtime &rt = this->runtime();
    moe_align(rt, alignment, in.ids.template as<const int>(), pairs, experts, 128);
    // The rows SKIP_PADDING 1 passes over: 64-127 of each tile whose row 64 is padding.
    std::vector<int> sorted_host(rows);
    sorted.read(sorted_host.data(), rows * 4);
    int tiles = 0; // totals[0]: the tiles moe_align filled (the rows past them are not written)
    totals.read(&tiles, sizeof(int));
    std::vector<std::size_t> skipped;
    for (std::size_t r = 0; r < std::size_t(tiles) * 128; r += 128)
      if (sorted_host[r + 64] < 0)
        skipped.push_back(r + 64);
    if (exact) { // experts 1, 3, 6 and 7 (not 2: its row 64 is a pair)
      EXPECT_EQ(skipped.size(), 4u);
    }
    struct Form {
      int gather, pingpong, epilogue, skip_up, skip_down;
    };
    const Form forms[] = {{1, 0, 0, 1, 1}, {0, 0, 0, 1, 1}, {1, 1, 0, 1, 1},
                          {0, 1, 0, 1, 1}, {1, 0, 1, 1, 1}, {0, 0, 1, 1, 1},
                          {0, 1, 1, 1, 1}, {0, 0, 1, 0, 0}, {0, 0, 1, 1, 0}};
    for (const auto &[gather, pingpong, epilogue, skip_up, skip_down] : forms) {
      SCOPED_TRACE("GATHER " + std::to_string(gather) + ", PINGPONG " + std::to_string(pingpong) +
                   ", EPILOGUE " + std::to_string(epilogue) + ", SKIP_PADDING " +
                   std::to_string(skip_up) + " / " + std::to_string(skip_down));
      std::vector<int> row_of(pairs);
      positions.read(row_of.data(), row_of.size() * sizeof(int));
      // GATHER 0 reads the sorted rows: the tokens' rows placed on the host (padding poisoned).
      std::vector<T> x_sorted = kjit::testing::poisoned<T>(rows * hidden);
      for (int p = 0; p < pairs; ++p)
        std::copy_n(x.begin() + std::size_t(p / top_k) * hidden, hidden,
                    x_sorted.begin() + std::size_t(row_of[p]) * hidden);
      DeviceBuffer a_sorted = this->template upload<T>(x_sorted);
      DeviceBuffer h = this->template poisoned<T>(rows * inter);
      DeviceBuffer y = this->template poisoned<T>(rows * hidden);
      auto up =
          detail::grouped_gemm_variant<T>(rt, true, gather == 1, pairs, experts, inter, hidden);
      auto down = detail::grouped_gemm_variant<T>(rt, false, false, pairs, experts, hidden, inter);
      for (auto *variant : {&up, &down}) { // PINGPONG: each consumer a tile of 128 x 128 products
        variant->params.set("EPILOGUE", epilogue);
        variant->params.set("SKIP_PADDING", variant == &up ? skip_up : skip_down);
        if (variant->integer("PINGPONG") != pingpong) {
          variant->params.set("PINGPONG", pingpong);
          variant->params.set("BLOCK_N", variant == &up ? 64 : 128);
          variant->params.set("STAGES", 6);
        }
      }
      int *order = gather == 1 ? nullptr : schedule.as<int>(); // GATHER 0: the dynamic order
      // Seven blocks, each walking a dozen tiles or more: PINGPONG's consumers take turns, and a
      // tile's stages follow another's in the ring.
      constexpr int most_blocks = 7;
      detail::grouped_gemm<T>(rt, up, h.as<T>(),
                              gather == 1 ? in.x_device.template as<const T>()
                                          : a_sorted.template as<const T>(),
                              layer.w13_device.template as<const T>(), rows, alignment, experts,
                              inter, hidden, top_k, order, nullptr, most_blocks);
      detail::grouped_gemm<T>(rt, down, y.as<T>(), h.as<const T>(),
                              layer.w2_device.template as<const T>(), rows, alignment, experts,
                              hidden, inter, top_k, order, nullptr, most_blocks);
      const std::vector<T> h_got = this->template download<T>(h, rows * inter);
      const std::vector<T> y_got = this->template download<T>(y, rows * hidden);
      std::size_t wrong = 0;
      for (int p = 0; p < pairs; ++p) {
        const std::size_t r = row_of[p];
        for (int j = 0; j < inter; ++j) {
          const double got = to_double(h_got[r * inter + j]);
          const std::size_t at = std::size_t(p) * inter + j;
          if (!(std::fabs(got - gated[at]) <= gated_bound[at]) && ++wrong <= 5)
            ADD_FAILURE() << "gate-up, pair " << p << " [" << j << "] got " << got << ", expected "
                          << gated[at] << " within " << gated_bound[at];
        }
        for (int i = 0; i < hidden; ++i) {
          double sum = 0, magnitude = 0;
          for (int j = 0; j < inter; ++j) {
            const double term = to_double(h_got[r * inter + j]) *
                                to_double(layer.w2[(std::size_t(ids[p]) * hidden + i) * inter + j]);
            sum += term;
            magnitude += std::fabs(term);
          }
          const double got = to_double(y_got[r * hidden + i]);
          const double bound = epsilon<T>() * (magnitude + std::fabs(sum));
          if (!(std::fabs(got - sum) <= bound) && ++wrong <= 5)
            ADD_FAILURE() << "down, pair " << p << " [" << i << "] got " << got << ", expected "
                          << sum << " within " << bound;
        }
      }
      EXPECT_EQ(wrong, 0u);
      // PINGPONG 0 with SKIP_PADDING 1 leaves the padding halves as they were: poison.
      std::size_t written = 0;
      for (const std::size_t first : skipped)
        for (std::size_t r = first; r < first + 64; ++r) {
          for (int j = 0; j < inter && pingpong == 0 && skip_up == 1; ++j)
            written += kjit::testing::is_poison(h_got[r * inter + j]) ? 0 : 1;
          for (int i = 0; i < hidden && pingpong == 0 && skip_down == 1; ++i)
            written += kjit::testing::is_poison(y_got[r * hidden + i]) ? 0 : 1;
        }
      EXPECT_EQ(written, 0u);
    }
  }
}

// A tuning record's winner for the grouped GEMM is taken, every tunable of it, and a tunable the
// record leaves out takes the template's default, as the variant the tuner timed did
// (with_winner), not the heuristic's value: here EPILOGUE 0 where the heuristic names 1 above
// 2048 pairs. Before s35 the lookup fell back to the heuristic's values and threw
// Error(bad_parameter) for SKIP_PADDING, which the heuristic did not name.
TYPED_TEST(MoeGpuTest, AGroupedGemmTuningRecordIsTakenWithTheTemplatesDefaults) {
  using T = TypeParam;
  if (this->device().target().id() != "sm_90a")
    GTEST_SKIP() << "moe_gemm_wgmma runs on sm_90a only; this device is "
                 << this->device().target().id();
  constexpr int experts = 8, pairs = 5000, hidden = 256;
  const Template &grouped = templates::find("moe_gemm_wgmma");
  const auto plant = [&](int inter, const ParamValues &winner) {
    const TuningKey key = TuningKey::of(
        grouped, {{"GATED", 1}, {"T", std::string(element_name<T>())}},
        {{"experts", experts}, {"k", hidden}, {"m", detail::rows_bucket(pairs)}, {"n", inter}},
        {this->device().target().id(), this->device().multiprocessors(), this->device().name()},
        this->runtime().compiler_identity(this->device().vendor()));
    TuningTable::from_config(this->runtime().config()).store({key, {winner, 1.0}, {}, 0});
    return detail::grouped_gemm_variant<T>(this->runtime(), true, false, pairs, experts, inter,
                                           hidden);
  };
  const ParamValues whole = {{"BLOCK_N", 64}, {"STAGES", 5},   {"GROUP_M", 2},
                             {"PINGPONG", 1}, {"EPILOGUE", 0}, {"SKIP_PADDING", 0}};
  const detail::ChosenVariant taken = plant(320, whole);
  for (const auto &[name, value] : whole)
    EXPECT_EQ(taken.integer(name), value.integer()) << name;
  ASSERT_EQ(
      detail::grouped_gemm_variant<T>(this->runtime(), true, false, pairs, experts, 384, hidden)
          .integer("EPILOGUE"),
      1); // the heuristic's, with no record for that shape
  const detail::ChosenVariant defaulted =
      plant(384, {{"BLOCK_N", 128}, {"STAGES", 4}, {"GROUP_M", 4}, {"PINGPONG", 0}});
  EXPECT_EQ(defaulted.integer("EPILOGUE"), 0);
  EXPECT_EQ(defaulted.integer("SKIP_PADDING"), 1);
  EXPECT_EQ(defaulted.integer("GROUP_M"), 4);
}

// FusedMoeOptions::validate: an id out of range (8 of 8 experts, then -2) is Error(bad_argument)
// naming it, before anything is launched; -1 passes and routes its slot nowhere.
TYPED_TEST(MoeGpuTest, ValidateRefusesAnIdOutOfRangeBeforeLaunchingAndPassesMinusOne) {
  const auto layer = this->make_layer(8, 256, 384);
  std::vector<int> all(8), ids;
  std::iota(all.begin(), all.end(), 0);
  std::vector<float> weights;
  this->random_routing(16, 2, all, 21, ids, weights);
  for (const auto &[bad, summary] :
       {std::pair{8, "kjit::ops::fused_moe: ids[4][1] is 8, outside [0, 8) (-1 routes a slot "
                     "nowhere)"},
        {-2, "kjit::ops::fused_moe: ids[4][1] is -2, outside [0, 8) (-1 routes a slot nowhere)"}}) {
    ids[9] = bad;
    auto in = this->make_tokens(16, layer.hidden, ids, weights);
    this->expect_refused(in, 2, this->weights_of(layer), summary);
  }
  ids[9] = -1;
  ids[14] = ids[15] = -1; // token 7 routed nowhere
  this->check_layer(layer, 16, 2, ids, weights, {}, "validated, -1 routes nowhere",
                    {.validate = true});
}

// The device's routing: moe_topk (softmax, and DeepSeek-V3's grouped sigmoid with a bias)
// against the reference, ids exactly.
TYPED_TEST(MoeGpuTest, TopkMatchesTheReferenceExactly) {
  using T = TypeParam;
  std::mt19937 rng(12);
  struct Case {
    int tokens, experts, top_k;
    TopkOptions options;
    bool bias;
  };
  const TopkOptions deepseek{.scoring = TopkOptions::Scoring::sigmoid,
                             .groups = 8,
                             .top_groups = 4,
                             .renormalize = true,
                             .scale = 2.5f};
  for (const Case &c :
       {Case{1000, 8, 2, {}, false}, Case{333, 64, 6, {.renormalize = false}, false},
        Case{257, 256, 8, deepseek, true}}) {
    std::vector<T> logits =
        gpu_testing::random_elements<T>(std::size_t(c.tokens) * c.experts, rng, -4, 4);
    std::fill(logits.begin(), logits.begin() + c.experts, from_double<T>(0.5)); // all tie
    std::vector<float> bias;
    for (int e = 0; c.bias && e < c.experts; ++e)
      bias.push_back(static_cast<float>(e % 5) * 0.0625f);
    DeviceBuffer logits_device = this->template upload<T>(logits);
    DeviceBuffer bias_device = this->device().allocate(std::max<std::size_t>(1, bias.size()) * 4);
    if (c.bias)
      bias_device.write(bias.data(), bias.size() * sizeof(float));
    DeviceBuffer ids = this->template poisoned<float>(std::size_t(c.tokens) * c.top_k);
    DeviceBuffer weights = this->template poisoned<float>(std::size_t(c.tokens) * c.top_k);
    moe_topk<T>(this->runtime(), weights.as<float>(), ids.as<int>(), logits_device.as<const T>(),
                c.bias ? bias_device.as<const float>() : nullptr, c.tokens, c.experts, c.top_k,
                c.options);
    const auto got_weights =
        this->template download<float>(weights, std::size_t(c.tokens) * c.top_k);
    std::vector<int> got_ids(got_weights.size());
    ids.read(got_ids.data(), got_ids.size() * sizeof(int));
    const reference::Routing expected =
        reference::moe_topk<T>(logits, bias, c.tokens, c.experts, c.top_k, c.options);
    EXPECT_EQ(got_ids, expected.ids) << c.experts << " experts";
    for (std::size_t i = 0; i < got_weights.size(); ++i)
      ASSERT_NEAR(got_weights[i], expected.weights[i], 1e-5 * c.options.scale) << i;
  }
}

// Routed by the device's moe_topk, as a model runs: the Mixtral-like layer (bfloat16) and the
// fine-grained one, three tokens of each count checked.
TYPED_TEST(MoeGpuTest, MixtralLikeAndFineGrainedLayersAtOneToFourThousandTokens) {
  using T = TypeParam;
  struct Shape {
    int experts, top_k, hidden, inter;
  };
  std::vector<Shape> shapes = {{64, 6, 2048, 1408}};
  if (std::is_same_v<T, BFloat16>)
    shapes.push_back({8, 2, 4096, 14336});
  for (const Shape &shape : shapes) {
    const auto layer = this->make_layer(shape.experts, shape.hidden, shape.inter);
    for (int tokens : {1, 16, 256, 4096}) {
      std::mt19937 rng(tokens);
      const std::vector<T> logits =
          gpu_testing::random_elements<T>(std::size_t(tokens) * shape.experts, rng, -2, 2);
      DeviceBuffer logits_device = this->template upload<T>(logits);
      DeviceBuffer ids = this->device().allocate(std::size_t(tokens) * shape.top_k * 4);
      DeviceBuffer weights = this->device().allocate(std::size_t(tokens) * shape.top_k * 4);
      topk_softmax<T>(this->runtime(), weights.as<float>(), ids.as<int>(),
                      logits_device.as<const T>(), tokens, shape.experts, shape.top_k, true);
      const auto host_weights =
          this->template download<float>(weights, std::size_t(tokens) * shape.top_k);
      std::vector<int> host_ids(host_weights.size());
      ids.read(host_ids.data(), host_ids.size() * sizeof(int));
      this->check_layer(layer, tokens, shape.top_k, host_ids, host_weights,
                        {0, tokens / 2, tokens - 1}, "routed by topk_softmax");
    }
  }
}

// fused_moe with e4m3 weights and 128 x 128 block scales against reference::fused_moe_fp8 (the
// weights decoded exactly, x quantised as the device quantises it, the gated intermediate in
// double). The device's gated intermediate is rounded to T and quantised to e4m3 per 1 x 128
// block: at most 2^-4 of each |gated_j| (half of e4m3's step, normal values) and 2 units of T's
// rounding, so each output lies within (2^-4 + 2 eps) * magnitude + eps * |out|. That bound
// grows with the sum of |terms| and would pass outputs of zeros where the terms cancel, so the
// RMS of the error is also held below 2^-4 of the RMS of the outputs: e4m3's rounding errors
// are about 2^-4 / sqrt(3) of each value and of random signs.
template <Element T> class MoeFp8GpuTest : public MoeGpuTest<T> {
protected:
  void SetUp() override {
    MoeGpuTest<T>::SetUp();
    if (this->IsSkipped())
      return;
    if (this->device().target().id() != "sm_90a")
      GTEST_SKIP() << "fused_moe with FP8 weights runs on sm_90a only (wgmma); this device is "
                   << this->device().target().id();
  }

  struct Fp8Layer {
    int experts, hidden, inter;
    std::vector<std::uint8_t> w13, w2;
    std::vector<float> w13_scales, w2_scales;
    DeviceBuffer w13_device, w2_device, w13_scales_device, w2_scales_device;
  };

  // `matrices` matrices [rows, columns] of N(0, 0.02) values, each quantised per 128 x 128
  // block: scale amax / 448, bytes e4m3 of value / scale.
  static void quantized(int matrices, int rows, int columns, std::uint32_t seed,
                        std::vector<std::uint8_t> &bytes, std::vector<float> &scales) {
    const std::size_t per = std::size_t(rows) * columns;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> values(per * matrices);
    for (float &value : values)
      value = normal(rng);
    const int block_rows = (rows + 127) / 128, block_columns = columns / 128;
    bytes.assign(values.size(), 0);
    scales.assign(std::size_t(matrices) * block_rows * block_columns, 0.0f);
    for (int m = 0; m < matrices; ++m)
      for (int br = 0; br < block_rows; ++br)
        for (int bc = 0; bc < block_columns; ++bc) {
          const auto at = [&](int r, int c) {
            return m * per + std::size_t(br * 128 + r) * columns + bc * 128 + c;
          };
          const int height = std::min(128, rows - br * 128);
          float amax = 0;
          for (int r = 0; r < height; ++r)
            for (int c = 0; c < 128; ++c)
              amax = std::max(amax, std::fabs(values[at(r, c)]));
          const float scale = amax / 448;
          scales[(std::size_t(m) * block_rows + br) * block_columns + bc] = scale;
          for (int r = 0; r < height; ++r)
            for (int c = 0; c < 128; ++c)
              bytes[at(r, c)] = encode_e4m3(values[at(r, c)] / scale);
        }
  }

  Fp8Layer make_fp8_layer(int experts, int hidden, int inter) {
    std::vector<std::uint8_t> w13, w2;
    std::vector<float> w13_scales, w2_scales;
    quantized(experts, 2 * inter, hidden, 11, w13, w13_scales);
    quantized(experts, hidden, inter, 12, w2, w2_scales);
    DeviceBuffer w13_device = this->upload_bytes(w13.data(), w13.size());
    DeviceBuffer w2_device = this->upload_bytes(w2.data(), w2.size());
    DeviceBuffer w13_scales_device =
        this->upload_bytes(w13_scales.data(), w13_scales.size() * sizeof(float));
    DeviceBuffer w2_scales_device =
        this->upload_bytes(w2_scales.data(), w2_scales.size() * sizeof(float));
    return Fp8Layer{experts,
                    hidden,
                    inter,
                    std::move(w13),
                    std::move(w2),
                    std::move(w13_scales),
                    std::move(w2_scales),
                    std::move(w13_device),
                    std::move(w2_device),
                    std::move(w13_scales_device),
                    std::move(w2_scales_device)};
  }

  static MoeWeightsFp8 weights_of(const Fp8Layer &layer) {
    return {layer.w13_device.template as<const std::uint8_t>(),
            layer.w2_device.template as<const std::uint8_t>(),
            {layer.w13_scales_device.template as<const float>(), layer.experts,
             2 * layer.inter / 128, layer.hidden / 128},
            {layer.w2_scales_device.template as<const float>(), layer.experts, layer.hidden / 128,
             layer.inter / 128},
            layer.experts,
            layer.hidden,
            layer.inter};
  }

  void check_fp8_layer(const Fp8Layer &layer, int tokens, int top_k, const std::vector<int> &ids,
                       const std::vector<float> &weights, std::vector<int> check,
                       const std::string &what, const FusedMoeOptions &options = {}) {
    SCOPED_TRACE(what + ": " + std::to_string(tokens) + " tokens, experts " +
                 std::to_string(layer.experts) + ", top " + std::to_string(top_k) + ", hidden " +
                 std::to_string(layer.hidden) + ", inter " + std::to_string(layer.inter));
    auto in = this->make_tokens(tokens, layer.hidden, ids, weights);
    this->run_layer(in, top_k, weights_of(layer), options);
    const std::vector<T> &x = in.x;
    const std::vector<T> got =
        this->template download<T>(in.out, std::size_t(tokens) * layer.hidden);
    if (check.empty()) {
      check.resize(tokens);
      std::iota(check.begin(), check.end(), 0);
    }
    const reference::Layer expected = reference::fused_moe_fp8<T>(
        x, weights, ids, top_k, layer.w13, layer.w13_scales, layer.w2, layer.w2_scales,
        layer.experts, layer.hidden, layer.inter, check);
    std::size_t wrong = 0;
    double error_squares = 0, out_squares = 0;
    for (std::size_t i = 0; i < check.size(); ++i)
      for (int h = 0; h < layer.hidden; ++h) {
        const std::size_t r = i * layer.hidden + h;
        const double value = to_double(got[std::size_t(check[i]) * layer.hidden + h]);
        const double error = std::fabs(value - expected.out[r]);
        const double bound = (1.0 / 16 + 2 * epsilon<T>()) * expected.magnitude[r] +
                             epsilon<T>() * std::fabs(expected.out[r]);
        error_squares += error * error;
        out_squares += expected.out[r] * expected.out[r];
        if (!(error <= bound) && ++wrong <= 5)
          ADD_FAILURE() << "token " << check[i] << " [" << h << "] got " << value << ", expected "
                        << expected.out[r] << " within " << bound;
      }
    EXPECT_EQ(wrong, 0u);
    EXPECT_LE(std::sqrt(error_squares), std::sqrt(out_squares) / 16)
        << "the RMS of the error against that of the outputs";
  }
};
TYPED_TEST_SUITE(MoeFp8GpuTest, HalfTypes);

// A small layer checked whole: experts without tokens, one expert with every token, ragged
// counts over every expert, and a token routed nowhere (ids out of range) that gets zeros.
TYPED_TEST(MoeFp8GpuTest, EmptyExpertsOneExpertWithAllRaggedCountsAndTokensRoutedNowhere) {
  const auto layer = this->make_fp8_layer(8, 256, 384);
  std::vector<int> ids;
  std::vector<float> weights;
  this->random_routing(37, 2, {1, 6}, 1, ids, weights);
  this->check_fp8_layer(layer, 37, 2, ids, weights, {}, "experts 1 and 6 only");
  this->random_routing(300, 1, {3}, 2, ids, weights);
  this->check_fp8_layer(layer, 300, 1, ids, weights, {}, "expert 3 takes every token");
  this->random_routing(181, 3, {0, 1, 2, 3, 4, 5, 6, 7}, 3, ids, weights);
  ids[3 * 5] = -1;
  ids[3 * 5 + 1] = 8;
  ids[3 * 5 + 2] = 1000;
  this->check_fp8_layer(layer, 181, 3, ids, weights, {}, "ragged, token 5 routed nowhere");
}

// FusedMoeOptions::validate with FP8 weights, as for the 16-bit layer.
TYPED_TEST(MoeFp8GpuTest, ValidateRefusesAnIdOutOfRangeBeforeLaunchingAndPassesMinusOne) {
  const auto layer = this->make_fp8_layer(8, 256, 384);
  std::vector<int> ids;
  std::vector<float> weights;
  this->random_routing(16, 3, {0, 1, 2, 3, 4, 5, 6, 7}, 22, ids, weights);
  ids[3 * 5 + 2] = 1000;
  auto in = this->make_tokens(16, layer.hidden, ids, weights);
  this->expect_refused(
      in, 3, this->weights_of(layer),
      "kjit::ops::fused_moe: ids[5][2] is 1000, outside [0, 8) (-1 routes a slot nowhere)");
  ids[3 * 5 + 2] = -1;
  this->check_fp8_layer(layer, 16, 3, ids, weights, {}, "validated, -1 routes nowhere",
                        {.validate = true});
}

// Smaller Mixtral-like (8 experts, top 2, inter 3.5 hidden) and fine-grained (64 experts, top 6)
// layers at 1, 16, 256 and 4096 tokens, three tokens of each checked.
TYPED_TEST(MoeFp8GpuTest, MixtralLikeAndFineGrainedLayersAtOneToFourThousandTokens) {
  struct Shape {
    int experts, top_k, hidden, inter;
  };
  for (const Shape &shape : {Shape{8, 2, 1024, 3584}, Shape{64, 6, 1024, 256}}) {
    const auto layer = this->make_fp8_layer(shape.experts, shape.hidden, shape.inter);
    std::vector<int> all(shape.experts);
    std::iota(all.begin(), all.end(), 0);
    for (int tokens : {1, 16, 256, 4096}) {
      std::vector<int> ids;
      std::vector<float> weights;
      this->random_routing(tokens, shape.top_k, all, tokens, ids, weights);
      this->check_fp8_layer(layer, tokens, shape.top_k, ids, weights, {0, tokens / 2, tokens - 1},
                            "random routing");
    }
  }
}

} // namespace
} // namespace kjit::ops

// gemm on the device against the double-precision reference.
#include "kjit/runtime/tuning_table.hpp"
#include "ops/src/variants.hpp"
#include "tests/ops/gpu_support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

template <Element T> class GemmGpuTest : public OpsGpuTest {};
TYPED_TEST_SUITE(GemmGpuTest, gpu_testing::ElementTypes);

// Whether gemm() and linear() run gemm_wgmma on `device` for aligned matrices with n and k
// multiples of 8.
template <Element T> bool serves_wgmma(const Device &device) {
  const void *aligned = reinterpret_cast<const void *>(std::uintptr_t{256});
  return detail::gemm_wgmma_serves<T>(device.target(), aligned, aligned, aligned, 8, 8);
}

struct GemmShape {
  int m, n, k;
  std::optional<GemmTiles> tiles = {}; // gemm_tiles_for's when empty
};

// The error of a float accumulation of k products is at most about k * 2^-24 times the sum of
// their magnitudes (each addition rounds once, relative to a partial sum bounded by that sum);
// then the result is rounded to T once, half a unit of T. So each element is checked against
// k * 2^-23 * sum|a||b| + epsilon<T>() * |exact|: twice each bound, for the margin.
template <Element T>
::testing::AssertionResult within_accumulation_error(const std::vector<T> &got,
                                                     const std::vector<double> &exact,
                                                     const std::vector<double> &magnitudes, int k) {
  return gpu_testing::within_bounds(got, exact, [&](std::size_t i) {
    return k * 0x1p-23 * magnitudes[i] + epsilon<T>() * std::fabs(exact[i]);
  });
}

template <Element T> std::vector<T> magnitudes_of(std::vector<T> values) {
  for (T &value : values)
    value = from_double<T>(std::fabs(to_double(value)));
  return values;
}

TYPED_TEST(GemmGpuTest, MatchesTheReferenceForSizesThatAreNotMultiplesOfTheTiles) {
  using T = TypeParam;
  const GemmShape shapes[] = {
      {1, 1, 1},
      {17, 127, 128},
      {127, 17, 1000},
      {128, 128, 17},
      {1000, 128, 127},
      {2049, 2047, 40}, // 128 x 128 tiles
      {257, 300, 129, GemmTiles{128, 128, 16, 8, 8}},
      {100, 70, 33, GemmTiles{32, 64, 8, 2, 4}},
      {127, 17, 65, GemmTiles{64, 64, 16, 4, 4}},
      // n and k multiples of 8 and nothing a multiple of the tiles: gemm_wgmma on sm_90a, its
      // 128-row, 128- or 256-column and 64-deep tiles cut by the tensor maps' bounds.
      {200, 264, 136},
      {77, 520, 72},
      {333, 136, 1000},
      {1, 2056, 264},
      {1100, 2056, 1032},
  };
  const bool hopper = serves_wgmma<T>(this->device());
  // Without tiles: gemm_wgmma on sm_90a, tensor cores where the device has them for T (half and
  // bfloat16 on NVIDIA), the portable kernel otherwise; with tiles, always the portable kernel.
  const bool tensor_cores = gemm_has_tensor_cores<T>(this->device().target());
  std::mt19937 rng(2024);
  for (const GemmShape &s : shapes) {
    const GemmTiles tiles = s.tiles.value_or(gemm_tiles_for(s.m, s.n, s.k));
    ::testing::Message trace;
    trace << s.m << " x " << s.n << " x " << s.k;
    if (!s.tiles && hopper && s.n % 8 == 0 && s.k % 8 == 0)
      trace << ", gemm_wgmma";
    else if (!s.tiles && tensor_cores)
      trace << ", tensor cores";
    else
      trace << ", portable, tiles " << tiles.block_m << "x" << tiles.block_n << "x" << tiles.block_k
            << " / " << tiles.thread_m << "x" << tiles.thread_n;
    SCOPED_TRACE(trace);
    const auto a = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
    const auto b = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.k) * s.n, rng, -1, 1);
    DeviceBuffer a_on_device = this->upload(a), b_on_device = this->upload(b);
    const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
    DeviceBuffer c = this->template poisoned<T>(c_count);
    if (s.tiles)
      gemm<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), b_on_device.as<T>(), s.m, s.n, s.k,
              *s.tiles);
    else
      gemm<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), b_on_device.as<T>(), s.m, s.n, s.k);
    const auto got = this->template download<T>(c, c_count);
    const auto exact = reference::gemm<T>(a, b, s.m, s.n, s.k);
    const auto magnitudes = reference::gemm<T>(magnitudes_of(a), magnitudes_of(b), s.m, s.n, s.k);
    EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, s.k));
  }
}

// linear(): C = A @ W^T with W [n, k]: linear_skinny for m <= 64 on sm_80 and newer (ragged m,
// n and k against its 8-token, 16-row and 32-element steps), gemm_wgmma reading W K-major on
// sm_90a above; elsewhere it refuses with a reason.
TYPED_TEST(GemmGpuTest, LinearMatchesTheReferenceOnTensorCoresAndRefusesElsewhere) {
  using T = TypeParam;
  std::mt19937 rng(77);
  const GemmShape shapes[] = {{1, 4104, 136}, {3, 4104, 4104},  {5, 264, 1000}, {16, 520, 72},
                              {33, 8, 4104},  {64, 136, 264},   {65, 264, 136}, {200, 264, 136},
                              {77, 520, 72},  {1100, 520, 1032}};
  const bool hopper = serves_wgmma<T>(this->device());
  const void *aligned = reinterpret_cast<const void *>(std::uintptr_t{256});
  for (const GemmShape &s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.n << " x " << s.k);
    const auto a = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
    const auto w = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.n) * s.k, rng, -1, 1);
    DeviceBuffer a_on_device = this->upload(a), w_on_device = this->upload(w);
    const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
    DeviceBuffer c = this->template poisoned<T>(c_count);
    auto run = [&] {
      linear<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), w_on_device.as<T>(), s.m, s.n,
                s.k);
    };
    if (!(s.m <= detail::linear_skinny_max_m
              ? detail::linear_skinny_serves<T>(this->device().target(), aligned, aligned, aligned,
                                                s.m, s.n, s.k)
              : hopper)) {
      EXPECT_THROW(run(), Error);
      continue;
    }
    run();
    const auto got = this->template download<T>(c, c_count);
    const auto exact = reference::linear<T>(a, w, s.m, s.n, s.k);
    const auto magnitudes = reference::linear<T>(magnitudes_of(a), magnitudes_of(w), s.m, s.n, s.k);
    EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, s.k));
  }
}

// linear_splitk's variants (token tiles, rows per warp, slices, splits) on ragged shapes: tokens
// past a tile, rows of W past a block, K not a multiple of 32 (checked chunks, a split ending
// inside a chunk) and K so short that some splits get nothing.
TYPED_TEST(GemmGpuTest, LinearSplitkVariantsMatchTheReferenceOnRaggedShapes) {
  using T = TypeParam;
  const void *aligned = reinterpret_cast<const void *>(std::uintptr_t{256});
  if (!detail::linear_splitk_serves<T>(this->device().target(), aligned, aligned, aligned, 1, 8, 8))
    GTEST_SKIP() << "linear_splitk serves half and bfloat16 on sm_90 and newer; this is "
                 << element_name<T>() << " on " << this->device().target().id();
  struct Variant {
    int m_tile, row_blocks, warps, k_slice, splits;
  };
  std::mt19937 rng(78);
  for (const Variant v : {Variant{16, 1, 8, 256, 1},
                          {32, 1, 8, 256, 2},
                          {64, 1, 8, 128, 8},
                          {128, 1, 4, 64, 4},
                          {64, 2, 4, 128, 4},
                          {32, 2, 8, 128, 8}})
    for (const GemmShape s : {GemmShape{v.m_tile - 3, 264, 1000}, {v.m_tile + 5, 136, 72}}) {
      SCOPED_TRACE(::testing::Message()
                   << "M_TILE " << v.m_tile << " ROW_BLOCKS " << v.row_blocks << " WARPS "
                   << v.warps << " K_SLICE " << v.k_slice << " SPLITS " << v.splits << ": " << s.m
                   << " x " << s.n << " x " << s.k);
      const detail::ChosenVariant variant{&templates::find("linear_splitk"),
                                          {{"T", element_name<T>()},
                                           {"M_TILE", v.m_tile},
                                           {"ROW_BLOCKS", v.row_blocks},
                                           {"WARPS", v.warps},
                                           {"K_SLICE", v.k_slice},
                                           {"SPLITS", v.splits}}};
      const auto a =
          gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
      const auto w =
          gpu_testing::random_elements<T>(static_cast<std::size_t>(s.n) * s.k, rng, -1, 1);
      DeviceBuffer a_on_device = this->upload(a), w_on_device = this->upload(w);
      const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
      DeviceBuffer c = this->template poisoned<T>(c_count);
      detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(), a_on_device.as<T>(),
                                     w_on_device.as<T>(), s.m, s.n, s.k, /*b_kmajor=*/true);
      const auto got = this->template download<T>(c, c_count);
      const auto exact = reference::linear<T>(a, w, s.m, s.n, s.k);
      const auto magnitudes =
          reference::linear<T>(magnitudes_of(a), magnitudes_of(w), s.m, s.n, s.k);
      EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, s.k));
    }
}

// A tuning record for the shape decides what linear() and gemm() launch: the call compiles one
// variant, the planted winner (asking for it again compiles nothing), which is not the
// heuristic's, and the result still matches the reference. On sm_90a the
// heuristic takes gemm_wgmma from one row. Covered: a linear_skinny record, which takes a 16-row
// linear() away from gemm_wgmma; a gemm_wgmma record for an 8-row linear() with other tunables
// than the heuristic's; and a gemm_wgmma record for gemm().
TYPED_TEST(GemmGpuTest, ATuningRecordForTheShapeChoosesWhatRuns) {
  using T = TypeParam;
  if (!serves_wgmma<T>(this->device()))
    GTEST_SKIP() << "gemm_wgmma and its records serve half and bfloat16 on sm_90a; this is "
                 << element_name<T>() << " on " << this->device().target().id();
  Runtime &rt = this->runtime();
  const Device &device = this->device();
  const Template &skinny = templates::find("linear_skinny"), &wgmma = templates::find("gemm_wgmma");
  struct Planted {
    bool linear; // else gemm()
    int m, n, k;
    const Template *tmpl;
    ParamValues winner;
  };
  const Planted cases[] = {
      {true,
       16,
       520,
       1032,
       &skinny,
       {{"M_TILE", 8}, {"ROW_BLOCKS", 2}, {"WARPS", 4}, {"UNROLL", 1}}},
      {true,
       8,
       264,
       136,
       &wgmma,
       {{"BLOCK_N", 128},
        {"STAGES", 3},
        {"GROUP_M", 1},
        {"B_KMAJOR", 1},
        {"SWAP_AB", 0},
        {"EPILOGUE", 1}}},
      {false,
       200,
       264,
       136,
       &wgmma,
       {{"BLOCK_N", 256}, {"STAGES", 3}, {"GROUP_M", 2}, {"B_KMAJOR", 0}}},
  };
  const TuningTable table = TuningTable::from_config(rt.config());
  const ParamValues problem = {{"T", element_name<T>()}};
  std::mt19937 rng(4242);
  for (const Planted &p : cases) {
    SCOPED_TRACE(::testing::Message() << (p.linear ? "linear " : "gemm ") << p.m << " x " << p.n
                                      << " x " << p.k << ", " << p.tmpl->name());
    table.store(
        {TuningKey::of(*p.tmpl, problem, detail::gemm_tuning_extents(p.m, p.n, p.k, p.linear),
                       {device.target().id(), device.multiprocessors(), device.name()},
                       rt.compiler_identity(device.vendor())),
         {p.winner, 1.0},
         {},
         0});
    const auto a = gpu_testing::random_elements<T>(static_cast<std::size_t>(p.m) * p.k, rng, -1, 1);
    const auto b = gpu_testing::random_elements<T>(static_cast<std::size_t>(p.n) * p.k, rng, -1, 1);
    DeviceBuffer a_on_device = this->upload(a), b_on_device = this->upload(b);
    const std::size_t c_count = static_cast<std::size_t>(p.m) * p.n;
    DeviceBuffer c = this->template poisoned<T>(c_count);
    const std::uint64_t before_the_call = rt.counters().compiled;
    if (p.linear)
      linear<T>(rt, c.as<T>(), a_on_device.as<T>(), b_on_device.as<T>(), p.m, p.n, p.k);
    else
      gemm<T>(rt, c.as<T>(), a_on_device.as<T>(), b_on_device.as<T>(), p.m, p.n, p.k);
    EXPECT_EQ(rt.counters().compiled, before_the_call + 1) << "the call built one variant";
    const auto got = this->template download<T>(c, c_count);
    const auto exact = p.linear ? reference::linear<T>(a, b, p.m, p.n, p.k)
                                : reference::gemm<T>(a, b, p.m, p.n, p.k);
    const auto magnitudes =
        p.linear ? reference::linear<T>(magnitudes_of(a), magnitudes_of(b), p.m, p.n, p.k)
                 : reference::gemm<T>(magnitudes_of(a), magnitudes_of(b), p.m, p.n, p.k);
    EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, p.k));

    ParamValues planted = problem;
    planted.add(p.winner);
    const std::uint64_t compiled = rt.counters().compiled;
    rt.kernel(*p.tmpl, planted);
    EXPECT_EQ(rt.counters().compiled, compiled) << "the variant the call built is not the winner";
    // So the call did not build the heuristic's, which is another variant. (Asking for that one
    // proves nothing: an earlier case's call may have built it for its own shape.)
    const detail::ChosenVariant heuristic = detail::gemm_wgmma_variant<T>(p.m, p.n, p.k, p.linear);
    EXPECT_TRUE(heuristic.tmpl != p.tmpl || heuristic.params != planted);
  }
}

// gemm_wgmma with M, N and K compiled in (SHAPE_M/N/K) computes what the run-time variant does,
// on ragged shapes, for gemm() and linear(); a call whose sizes differ from the compiled ones is
// refused.
TYPED_TEST(GemmGpuTest, ShapeSpecialisedWgmmaMatchesTheReference) {
  using T = TypeParam;
  if (!serves_wgmma<T>(this->device()))
    GTEST_SKIP() << "gemm_wgmma serves half and bfloat16 on sm_90a; this is " << element_name<T>()
                 << " on " << this->device().target().id();
  std::mt19937 rng(99);
  const GemmShape shapes[] = {{200, 264, 136}, {77, 520, 72}, {1100, 2056, 1032}};
  for (bool b_kmajor : {false, true})
    for (const GemmShape &s : shapes) {
      SCOPED_TRACE(::testing::Message()
                   << (b_kmajor ? "linear " : "gemm ") << s.m << " x " << s.n << " x " << s.k);
      detail::ChosenVariant variant = detail::gemm_wgmma_variant<T>(s.m, s.n, s.k, b_kmajor);
      variant.params.add({{"SHAPE_M", s.m}, {"SHAPE_N", s.n}, {"SHAPE_K", s.k}});
      const auto a =
          gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
      const auto b =
          gpu_testing::random_elements<T>(static_cast<std::size_t>(s.n) * s.k, rng, -1, 1);
      DeviceBuffer a_on_device = this->upload(a), b_on_device = this->upload(b);
      const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
      DeviceBuffer c = this->template poisoned<T>(c_count);
      detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(), a_on_device.as<T>(),
                                     b_on_device.as<T>(), s.m, s.n, s.k, b_kmajor);
      const auto got = this->template download<T>(c, c_count);
      const auto exact = b_kmajor ? reference::linear<T>(a, b, s.m, s.n, s.k)
                                  : reference::gemm<T>(a, b, s.m, s.n, s.k);
      const auto magnitudes =
          b_kmajor ? reference::linear<T>(magnitudes_of(a), magnitudes_of(b), s.m, s.n, s.k)
                   : reference::gemm<T>(magnitudes_of(a), magnitudes_of(b), s.m, s.n, s.k);
      EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, s.k));
      EXPECT_THROW(detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(),
                                                  a_on_device.as<T>(), b_on_device.as<T>(), s.m - 1,
                                                  s.n, s.k, b_kmajor),
                   Error);
    }
}

// gemm_wgmma in clusters of two blocks along M and along N (B's or A's tiles multicast to the
// pair) and with either epilogue, at both tile widths, and with K split over clusters of 2, 4
// and 8 blocks (BLOCK_N 128), for gemm() and linear(), against one fp64 reference per shape. The
// shapes are multiples of no tile size and have odd tile counts, so that a pair's second tile
// lies past the matrix, and a K shorter than one step; for the splits also a single row, K not
// a multiple of a step, splits that get no step of K, and more tiles than the device runs
// clusters at once (a cluster's next tile waits until its peers have read the last one's sums).
TYPED_TEST(GemmGpuTest, ClusteredSplitKWgmmaAndBothEpiloguesMatchTheReference) {
  using T = TypeParam;
  if (!serves_wgmma<T>(this->device()))
    GTEST_SKIP() << "gemm_wgmma serves half and bfloat16 on sm_90a; this is " << element_name<T>()
                 << " on " << this->device().target().id();
  struct Layout {
    int cluster_m, cluster_n, epilogue, split_k;
  };
  const Layout layouts[] = {{1, 1, 0, 1}, {1, 1, 1, 1}, {2, 1, 1, 1}, {1, 2, 1, 1}, {2, 1, 0, 1},
                            {1, 2, 0, 1}, {1, 1, 0, 2}, {1, 1, 0, 4}, {1, 1, 0, 8}};
  const GemmShape shapes[] = {{72, 136, 40},    {200, 264, 136},  {1100, 2056, 1032},
                              {1, 264, 1000},   {77, 136, 4104},  {200, 520, 200},
                              {300, 2056, 256}, {129, 4104, 1032}};
  std::mt19937 rng(1717);
  for (bool b_kmajor : {false, true})
    for (const GemmShape &s : shapes) {
      const auto a =
          gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
      const auto b =
          gpu_testing::random_elements<T>(static_cast<std::size_t>(s.n) * s.k, rng, -1, 1);
      DeviceBuffer a_on_device = this->upload(a), b_on_device = this->upload(b);
      const auto exact = b_kmajor ? reference::linear<T>(a, b, s.m, s.n, s.k)
                                  : reference::gemm<T>(a, b, s.m, s.n, s.k);
      const auto magnitudes =
          b_kmajor ? reference::linear<T>(magnitudes_of(a), magnitudes_of(b), s.m, s.n, s.k)
                   : reference::gemm<T>(magnitudes_of(a), magnitudes_of(b), s.m, s.n, s.k);
      const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
      for (int block_n : {128, 256})
        for (const Layout &layout : layouts) {
          if (layout.split_k > 1 && block_n != 128)
            continue;
          SCOPED_TRACE(::testing::Message()
                       << (b_kmajor ? "linear " : "gemm ") << s.m << " x " << s.n << " x " << s.k
                       << ", BLOCK_N " << block_n << ", cluster " << layout.cluster_m << " x "
                       << layout.cluster_n << ", epilogue " << layout.epilogue << ", SPLIT_K "
                       << layout.split_k);
          detail::ChosenVariant variant = detail::gemm_wgmma_variant<T>(s.m, s.n, s.k, b_kmajor);
          variant.params.set("BLOCK_N", block_n);
          variant.params.set("STAGES", block_n == 256 ? 4 : 5);
          variant.params.set("CLUSTER_M", layout.cluster_m);
          variant.params.set("CLUSTER_N", layout.cluster_n);
          variant.params.set("EPILOGUE", layout.epilogue);
          variant.params.set("SPLIT_K", layout.split_k);
          variant.params.set("SWAP_AB", 0);   // TransposedWgmma... covers linear()'s SWAP_AB 1
          variant.params.set("BLOCK_M", 128); // 64-row tiles are SWAP_AB's alone
          DeviceBuffer c = this->template poisoned<T>(c_count);
          detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(), a_on_device.as<T>(),
                                         b_on_device.as<T>(), s.m, s.n, s.k, b_kmajor);
          const auto got = this->template download<T>(c, c_count);
          EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, s.k));
        }
    }
}

// linear()'s transposed gemm_wgmma (SWAP_AB: W as wgmma's A, the activations as its N side) at
// 1 to 128 rows: the heuristic's variant, every K split (BLOCK_N 16 with 8 splits: fewer float4s
// of sums a thread than splits), a wider tile than the rows need, and clusters of two tiles of W
// sharing the activations' copies, each also with tiles of 64 rows of W (BLOCK_M 64, one
// consumer), 128-row tiles of W with K split in four (BLOCK_N 128) and in two (BLOCK_N 64), and
// pairs of tiles of the activations sharing W's copies (CLUSTER_N 2) with 64- and 128-row tiles
// of W, against the fp64 reference with a poisoned C. Rows of A that
// are odd (a pair's second element past C), past a tile, a single row; rows of W past a tile;
// K not a multiple of a step, and splits with no K.
TYPED_TEST(GemmGpuTest, TransposedWgmmaMatchesTheReferenceOnRaggedShapes) {
  using T = TypeParam;
  if (!serves_wgmma<T>(this->device()))
    GTEST_SKIP() << "gemm_wgmma serves half and bfloat16 on sm_90a; this is " << element_name<T>()
                 << " on " << this->device().target().id();
  struct Layout {
    int block_n, cluster_m, split_k, block_m; // 0: the heuristic's (cluster_m: both clusters)
    int cluster_n = 1;
  };
  const Layout layouts[] = {
      {0, 0, 0, 0},      {0, 1, 1, 0},       {0, 1, 2, 0},      {0, 1, 4, 0},    {0, 1, 8, 0},
      {128, 1, 2, 0},    {0, 2, 1, 0},       {0, 1, 1, 64},     {0, 1, 2, 64},   {0, 1, 8, 64},
      {128, 1, 1, 64},   {0, 2, 1, 64},      {128, 1, 4, 128},  {64, 1, 2, 128}, {16, 1, 1, 64, 2},
      {64, 1, 1, 64, 2}, {32, 1, 1, 128, 2}, {64, 1, 1, 128, 2}};
  const GemmShape shapes[] = {{1, 264, 1000},   {13, 136, 4104},   {16, 4104, 1032},
                              {29, 520, 200},   {64, 2056, 256},   {77, 136, 72},
                              {100, 264, 1000}, {128, 4104, 1032}, {128, 8200, 264}};
  std::mt19937 rng(2828);
  for (const GemmShape &s : shapes) {
    const auto a = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
    const auto w = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.n) * s.k, rng, -1, 1);
    DeviceBuffer a_on_device = this->upload(a), w_on_device = this->upload(w);
    const auto exact = reference::linear<T>(a, w, s.m, s.n, s.k);
    const auto magnitudes = reference::linear<T>(magnitudes_of(a), magnitudes_of(w), s.m, s.n, s.k);
    const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
    for (const Layout &layout : layouts) {
      detail::ChosenVariant variant = detail::gemm_wgmma_variant<T>(s.m, s.n, s.k, true);
      ASSERT_EQ(variant.integer("SWAP_AB"), 1);
      if (layout.block_n > 0)
        variant.params.set("BLOCK_N", layout.block_n);
      if (layout.split_k > 0)
        variant.params.set("SPLIT_K", layout.split_k);
      if (layout.block_m > 0)
        variant.params.set("BLOCK_M", layout.block_m);
      if (layout.cluster_m > 0) {
        variant.params.set("CLUSTER_M", layout.cluster_m);
        variant.params.set("CLUSTER_N", layout.cluster_n);
      }
      if (layout.cluster_m * layout.cluster_n > 1)
        variant.params.set("SPLIT_K", 1);
      if (layout.block_n > 0 || layout.split_k > 0 || layout.cluster_m * layout.cluster_n > 1)
        variant.params.set("STAGES", 4); // fits every layout's shared memory
      SCOPED_TRACE(::testing::Message()
                   << s.m << " x " << s.n << " x " << s.k << ", BLOCK_M "
                   << variant.integer("BLOCK_M") << ", BLOCK_N " << variant.integer("BLOCK_N")
                   << ", SPLIT_K " << variant.integer("SPLIT_K") << ", CLUSTER_M "
                   << variant.integer("CLUSTER_M") << ", CLUSTER_N "
                   << variant.integer("CLUSTER_N"));
      DeviceBuffer c = this->template poisoned<T>(c_count);
      detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(), a_on_device.as<T>(),
                                     w_on_device.as<T>(), s.m, s.n, s.k, true);
      const auto got = this->template download<T>(c, c_count);
      EXPECT_TRUE(within_accumulation_error(got, exact, magnitudes, s.k));
    }
  }
}

// A kernel that lets the stream's next kernel start at once (as gemm_wgmma does) and then, after
// spinning for `cycles`, copies `words` 4-byte words: the slow predecessor of a programmatic
// dependent launch.
const Template
    early_trigger_copy("early_trigger_copy", R"(
__global__ void early_trigger_copy(unsigned *to, const unsigned *from, int words, long long cycles) {
  kjit::let_dependents_start();
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < words; i += gridDim.x * blockDim.x)
    to[i] = from[i];
})",
                       {}, {.arguments = {"unsigned*", "const unsigned*", "int", "long long"}});

// linear() launches gemm_wgmma as a programmatic dependent launch (gemm.cpp): its blocks may start
// while the stream's previous kernel still runs, once that kernel has let them, and must wait for
// it before touching memory. Behind a kernel that lets them start at once and then spins for about
// 0.5 ms: that kernel writes A, which linear() then reads (read after write), and reads the C that
// linear() then overwrites (write after read); then two linear() in a row, the second reading the
// first's C (an MLP's two projections). Into poisoned buffers, against the fp64 reference.
TYPED_TEST(GemmGpuTest, LinearWaitsForTheKernelBeforeItToFinish) {
  using T = TypeParam;
  if (!serves_wgmma<T>(this->device()))
    GTEST_SKIP() << "gemm_wgmma serves half and bfloat16 on sm_90a; this is " << element_name<T>()
                 << " on " << this->device().target().id();
  const Kernel &copy = this->runtime().kernel(early_trigger_copy, {});
  const long long spin = 1'000'000; // cycles: about 0.5 ms at the H100's 1980 MHz
  const auto copy_words = [&](DeviceBuffer &to, const DeviceBuffer &from, std::size_t elements) {
    copy.launch({.grid = 4, .block = 256}, to.as<unsigned>(), from.as<const unsigned>(),
                static_cast<int>(elements * sizeof(T) / 4), spin);
  };
  std::mt19937 rng(4242);
  const GemmShape shapes[] = {{128, 4096, 1024}, {1000, 2048, 512}};
  for (const GemmShape &s : shapes) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.n << " x " << s.k);
    const std::size_t a_count = static_cast<std::size_t>(s.m) * s.k;
    const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
    const auto a = gpu_testing::random_elements<T>(a_count, rng, -1, 1);
    const auto w = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.n) * s.k, rng, -1, 1);
    const auto w2 =
        gpu_testing::random_elements<T>(static_cast<std::size_t>(s.k) * s.n, rng, -1, 1);
    DeviceBuffer a_source = this->upload(a), w_on_device = this->upload(w);
    DeviceBuffer w2_on_device = this->upload(w2);
    DeviceBuffer a_on_device = this->template poisoned<T>(a_count);
    DeviceBuffer c = this->template poisoned<T>(c_count);
    const auto exact = reference::linear<T>(a, w, s.m, s.n, s.k);
    const auto magnitudes = reference::linear<T>(magnitudes_of(a), magnitudes_of(w), s.m, s.n, s.k);

    copy_words(a_on_device, a_source, a_count); // read after write
    linear<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), w_on_device.as<T>(), s.m, s.n, s.k);
    const auto first = this->template download<T>(c, c_count);
    EXPECT_TRUE(within_accumulation_error(first, exact, magnitudes, s.k));

    DeviceBuffer c_before = this->template poisoned<T>(c_count);
    const auto a_other = gpu_testing::random_elements<T>(a_count, rng, -1, 1);
    DeviceBuffer a_other_on_device = this->upload(a_other);
    copy_words(c_before, c, c_count); // write after read
    linear<T>(this->runtime(), c.as<T>(), a_other_on_device.as<T>(), w_on_device.as<T>(), s.m, s.n,
              s.k);
    const auto kept = this->template download<T>(c_before, c_count);
    EXPECT_EQ(0, std::memcmp(kept.data(), first.data(), c_count * sizeof(T)))
        << "linear() overwrote C before the kernel before it had read it";

    DeviceBuffer c2 = this->template poisoned<T>(a_count);
    linear<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), w_on_device.as<T>(), s.m, s.n, s.k);
    linear<T>(this->runtime(), c2.as<T>(), c.as<T>(), w2_on_device.as<T>(), s.m, s.k, s.n);
    const auto hidden = this->template download<T>(c, c_count);
    const auto second = this->template download<T>(c2, a_count);
    EXPECT_TRUE(within_accumulation_error(
        second, reference::linear<T>(hidden, w2, s.m, s.k, s.n),
        reference::linear<T>(magnitudes_of(hidden), magnitudes_of(w2), s.m, s.k, s.n), s.n));
  }
}

// On a large ragged shape, every cluster and epilogue layout writes bit for bit what the
// single-block register-epilogue kernel writes: each element's products are accumulated by the
// same wgmma sequence and rounded once, whoever copied the tiles and however C is stored.
TYPED_TEST(GemmGpuTest, ClusteredWgmmaWritesWhatTheSingleBlockKernelWrites) {
  using T = TypeParam;
  if (!serves_wgmma<T>(this->device()))
    GTEST_SKIP() << "gemm_wgmma serves half and bfloat16 on sm_90a; this is " << element_name<T>()
                 << " on " << this->device().target().id();
  const int m = 4100, n = 4104, k = 4104;
  std::mt19937 rng(4100);
  const auto a = gpu_testing::random_elements<T>(static_cast<std::size_t>(m) * k, rng, -1, 1);
  const auto b = gpu_testing::random_elements<T>(static_cast<std::size_t>(n) * k, rng, -1, 1);
  DeviceBuffer a_on_device = this->upload(a), b_on_device = this->upload(b);
  const std::size_t c_count = static_cast<std::size_t>(m) * n;
  auto run = [&](int cluster_m, int cluster_n, int epilogue) {
    detail::ChosenVariant variant = detail::gemm_wgmma_variant<T>(m, n, k, false);
    variant.params.set("CLUSTER_M", cluster_m);
    variant.params.set("CLUSTER_N", cluster_n);
    variant.params.set("EPILOGUE", epilogue);
    DeviceBuffer c = this->template poisoned<T>(c_count);
    detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(), a_on_device.as<T>(),
                                   b_on_device.as<T>(), m, n, k, false);
    return this->template download<T>(c, c_count);
  };
  const std::vector<T> single = run(1, 1, 0);
  ASSERT_FALSE(std::isnan(to_double(single[c_count - 1])));
  for (const auto &[cluster_m, cluster_n, epilogue] :
       {std::tuple{1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {2, 1, 0}}) {
    SCOPED_TRACE(::testing::Message()
                 << "cluster " << cluster_m << " x " << cluster_n << ", epilogue " << epilogue);
    const std::vector<T> got = run(cluster_m, cluster_n, epilogue);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < c_count; ++i)
      differ += std::memcmp(&got[i], &single[i], sizeof(T)) != 0;
    EXPECT_EQ(differ, 0u) << "of " << c_count;
  }
}

// Writes `values` as raw little-endian elements (the host's layout, x86 and Arm alike).
template <typename T>
void write_raw(const std::filesystem::path &path, const std::vector<T> &values) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out.flush())
    throw std::runtime_error("cannot write " + path.string());
}

// Big ragged products against torch's fp32 matmul, which this binary cannot call: with
// KJIT_GEMM_DUMP_DIR set, each case's A, B and C go there as raw files, with a JSON header per
// C, for tests/python/gemm_check_torch.py to check (tools/gpu-check --run runs both). A fp64
// reference on the CPU would take minutes per shape. Here only that no poison is left behind.
// Layouts: gemm() as its heuristic chooses, gemm_wgmma in a 2 x 1 cluster with the shared-memory
// epilogue, and linear() (B as W [n, k], torch's layout); n and k are multiples of 8 (wgmma's
// condition) and none of M, N, K is a multiple of any tile.
TYPED_TEST(GemmGpuTest, BigRaggedProductsAreDumpedForTheTorchCheck) {
  using T = TypeParam;
  if constexpr (std::is_same_v<T, float>)
    GTEST_SKIP() << "gemm_wgmma, the kernel these shapes are for, serves half and bfloat16";
  const char *dump = std::getenv("KJIT_GEMM_DUMP_DIR");
  if (dump == nullptr || *dump == '\0')
    GTEST_SKIP() << "KJIT_GEMM_DUMP_DIR is not set: tools/gpu-check --run sets it and checks the "
                    "files with tests/python/gemm_check_torch.py";
  const std::filesystem::path dir(dump);
  if (!serves_wgmma<T>(this->device())) {
    // The checker reads this as "no result" rather than as a dump that went missing.
    std::ofstream(dir / "SKIPPED") << "gemm_wgmma serves half and bfloat16 on sm_90a; this is "
                                   << this->device().target().id() << "\n";
    GTEST_SKIP() << "gemm_wgmma serves half and bfloat16 on sm_90a; this is " << element_name<T>()
                 << " on " << this->device().target().id();
  }
  enum class Call { gemm, gemm_cluster_2x1, linear };
  const GemmShape shapes[] = {{4100, 4104, 4104}, {8195, 8200, 8200}};
  std::mt19937 rng(1700);
  for (const GemmShape &s : shapes) {
    const std::string shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
                              std::to_string(s.k) + "-" + std::string(element_name<T>());
    const auto a = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.m) * s.k, rng, -1, 1);
    const auto b = gpu_testing::random_elements<T>(static_cast<std::size_t>(s.k) * s.n, rng, -1, 1);
    write_raw(dir / (shape + ".a"), a);
    write_raw(dir / (shape + ".b"), b);
    DeviceBuffer a_on_device = this->upload(a), b_on_device = this->upload(b);
    const std::size_t c_count = static_cast<std::size_t>(s.m) * s.n;
    for (const auto &[call, name] : {std::pair{Call::gemm, "gemm"},
                                     {Call::gemm_cluster_2x1, "gemm-cluster2x1"},
                                     {Call::linear, "linear"}}) {
      SCOPED_TRACE(::testing::Message() << shape << ", " << name);
      DeviceBuffer c = this->template poisoned<T>(c_count);
      if (call == Call::gemm) {
        gemm<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), b_on_device.as<T>(), s.m, s.n,
                s.k);
      } else if (call == Call::linear) {
        linear<T>(this->runtime(), c.as<T>(), a_on_device.as<T>(), b_on_device.as<T>(), s.m, s.n,
                  s.k);
      } else {
        detail::ChosenVariant variant = detail::gemm_wgmma_variant<T>(s.m, s.n, s.k, false);
        variant.params.set("CLUSTER_M", 2);
        variant.params.set("CLUSTER_N", 1);
        variant.params.set("EPILOGUE", 1);
        detail::launch_gemm_variant<T>(this->runtime(), variant, c.as<T>(), a_on_device.as<T>(),
                                       b_on_device.as<T>(), s.m, s.n, s.k, false);
      }
      const auto got = this->template download<T>(c, c_count);
      std::size_t poison = 0;
      for (const T &value : got)
        poison += std::isnan(to_double(value));
      EXPECT_EQ(poison, 0u) << "elements of " << c_count << " left NaN (poison)";
      const std::string stem = shape + "-" + name;
      write_raw(dir / (stem + ".c"), got);
      std::ofstream(dir / (stem + ".json"))
          << "{\"case\": \"" << stem << "\", \"dtype\": \"" << element_name<T>()
          << "\", \"m\": " << s.m << ", \"n\": " << s.n << ", \"k\": " << s.k
          << ", \"b_layout\": \"" << (call == Call::linear ? "n_by_k" : "k_by_n") << "\", \"a\": \""
          << shape << ".a\", \"b\": \"" << shape << ".b\", \"c\": \"" << stem << ".c\"}\n";
    }
  }
}

} // namespace
} // namespace kjit::ops

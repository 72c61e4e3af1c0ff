// gemm_fp8_blockscale and gemm_fp8_scaled on the GPU against the double-precision reference,
// with e4m3 inputs (in the device's encoding) quantised from data of realistic ranges
// (activations whose rows span four orders of magnitude, weights whose blocks span two),
// poisoned outputs and ragged shapes: the operators on sm_90a (wgmma) and gfx942 / gfx950 (MFMA),
// the explicit wgmma variants on sm_90a.
#include "kjit/ops/gemm_fp8.hpp"
#include "kjit/ops/quant.hpp"
#include "ops/src/gemm_fp8_mfma.hpp"
#include "ops/src/variants.hpp"
#include "tests/ops/gpu_support.hpp"

#include <algorithm>
#include <cmath>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

class GemmFp8GpuTest : public OpsGpuTest {
public:
  using OpsGpuTest::download;
  using OpsGpuTest::poisoned;
  using OpsGpuTest::runtime;

  // Bytes (e4m3 values) or floats (scales) on the device.
  template <typename V> DeviceBuffer upload_raw(const std::vector<V> &host) {
    DeviceBuffer buffer = device().allocate(host.size() * sizeof(V));
    buffer.write(host.data(), host.size() * sizeof(V));
    return buffer;
  }

  void SetUp() override {
    OpsGpuTest::SetUp();
    if (IsSkipped())
      return;
    if (device().target().id() != "sm_90a" && !detail::gemm_fp8_mfma_serves(device().target()))
      GTEST_SKIP() << "gemm_fp8 runs on sm_90a (wgmma) and gfx942 / gfx950 (MFMA); this device is "
                   << device().target().id();
  }

  // The e4m3 encoding the device's gemm_fp8 reads.
  Fp8Encoding encoding() { return gemm_fp8_encoding(device().target()); }

  // Why a test of explicit gemm_fp8 (wgmma) variants skips on this device, or nothing on sm_90a.
  std::string without_wgmma() {
    if (device().target().id() == "sm_90a")
      return {};
    return "the wgmma variants of gemm_fp8 run on sm_90a; this device is " +
           device().target().id() + " (its operators, gemm_fp8_mfma, are tested beside this)";
  }
};

// A [rows, k] matrix quantised to e4m3 of `encoding` with one scale per `block_rows` x
// `block_columns` block (amax over the largest finite value, 448 or 240, as DeepSeek-V3's
// quantisers take it), the scales [ceil(rows / block_rows), ceil(k / block_columns)] row-major.
struct Quantised {
  std::vector<std::uint8_t> values;
  std::vector<float> scales;
};

Quantised quantise(const std::vector<double> &x, int rows, int k, int block_rows, int block_columns,
                   Fp8Encoding encoding) {
  const bool fnuz = encoding == Fp8Encoding::e4m3fnuz;
  const double largest = fnuz ? 240 : 448;
  const int grid_rows = (rows + block_rows - 1) / block_rows;
  const int grid_columns = (k + block_columns - 1) / block_columns;
  Quantised q{std::vector<std::uint8_t>(x.size()),
              std::vector<float>(static_cast<std::size_t>(grid_rows) * grid_columns)};
  for (int br = 0; br < grid_rows; ++br)
    for (int bc = 0; bc < grid_columns; ++bc) {
      double amax = 0;
      for (int r = br * block_rows; r < std::min(rows, (br + 1) * block_rows); ++r)
        for (int c = bc * block_columns; c < std::min(k, (bc + 1) * block_columns); ++c)
          amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(r) * k + c]));
      const float scale = amax > 0 ? static_cast<float>(amax / largest) : 1.0f;
      q.scales[static_cast<std::size_t>(br) * grid_columns + bc] = scale;
      for (int r = br * block_rows; r < std::min(rows, (br + 1) * block_rows); ++r)
        for (int c = bc * block_columns; c < std::min(k, (bc + 1) * block_columns); ++c) {
          const std::size_t i = static_cast<std::size_t>(r) * k + c;
          q.values[i] = fnuz ? encode_e4m3fnuz(x[i] / scale) : encode_e4m3(x[i] / scale);
        }
    }
  return q;
}

// Activations: normal values, each row scaled by 10^u, u uniform in [-2, 2] (outlier tokens).
std::vector<double> activations(int rows, int k, std::mt19937 &rng) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> exponent(-2, 2);
  std::vector<double> x(static_cast<std::size_t>(rows) * k);
  for (int r = 0; r < rows; ++r) {
    const double row_scale = std::pow(10.0, exponent(rng));
    for (int c = 0; c < k; ++c)
      x[static_cast<std::size_t>(r) * k + c] = normal(rng) * row_scale;
  }
  return x;
}

// Weights: uniform in +-w, w = 10^u per 128 x 128 block, u uniform in [-3, -1].
std::vector<double> weights(int rows, int k, std::mt19937 &rng) {
  std::uniform_real_distribution<double> exponent(-3, -1), uniform(-1, 1);
  const int grid_columns = (k + 127) / 128;
  std::vector<double> block_scales(static_cast<std::size_t>((rows + 127) / 128) * grid_columns);
  for (double &s : block_scales)
    s = std::pow(10.0, exponent(rng));
  std::vector<double> x(static_cast<std::size_t>(rows) * k);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < k; ++c)
      x[static_cast<std::size_t>(r) * k + c] =
          uniform(rng) * block_scales[static_cast<std::size_t>(r / 128) * grid_columns + c / 128];
  return x;
}

// The e4m3 bytes with their sign bits cleared: |value|, for the magnitudes' reference.
std::vector<std::uint8_t> magnitudes(std::vector<std::uint8_t> values) {
  for (std::uint8_t &v : values)
    v &= 0x7f;
  return values;
}

// Each element within 2^-9 of the sum of its products' magnitudes (the tensor cores' fp8
// accumulation keeps fewer bits than float's) plus 2^-7 of itself (bfloat16's rounding is 2^-9;
// four times it); a wrong scale or block moves elements by their own size. NaN (poison) fails.
::testing::AssertionResult within_fp8_error(const std::vector<BFloat16> &got,
                                            const std::vector<double> &exact,
                                            const std::vector<double> &sizes) {
  return gpu_testing::within_bounds(
      got, exact, [&](std::size_t i) { return 0x1p-9 * sizes[i] + 0x1p-7 * std::fabs(exact[i]); });
}

struct Shape {
  int m, n, k;
};

// gemm_fp8's scaling forms: one scale per tensor, per row (of A and of B), or per block.
enum class Form { tensor, rows, block };

// Operands of a form and shape on the device, quantised from activations and weights of
// realistic ranges (blocks: 1 x 128 of A, 128 x 128 of B), and their reference; `check` runs a
// launch (d, a, scale_a, b, scale_b) into a poisoned D and compares it.
class Fp8Case {
public:
  Fp8Case(GemmFp8GpuTest &test, const Shape s, Form form, std::mt19937 &rng)
      : test_(test), s_(s), form_(form),
        a_(quantise(activations(s.m, s.k, rng), s.m, s.k, form == Form::tensor ? s.m : 1,
                    form == Form::block ? 128 : s.k, test.encoding())),
        b_(quantise(weights(s.n, s.k, rng), s.n, s.k,
                    form == Form::tensor ? s.n
                    : form == Form::rows ? 1
                                         : 128,
                    form == Form::block ? 128 : s.k, test.encoding())),
        a_on_(test.upload_raw(a_.values)), b_on_(test.upload_raw(b_.values)),
        sa_on_(test.upload_raw(a_.scales)), sb_on_(test.upload_raw(b_.scales)),
        exact_(reference::gemm_fp8(a_.values, a_.scales, b_.values, b_.scales, s.m, s.n, s.k,
                                   form == Form::block, test.encoding())),
        sizes_(reference::gemm_fp8(magnitudes(a_.values), a_.scales, magnitudes(b_.values),
                                   b_.scales, s.m, s.n, s.k, form == Form::block,
                                   test.encoding())) {}

  // The operator, as a user calls it.
  void check_operator() {
    check([&](BFloat16 *d, auto *a, auto *sa, auto *b, auto *sb) {
      if (form_ == Form::block)
        gemm_fp8_blockscale(test_.runtime(), d, a, {sa, s_.m, s_.k / 128}, b,
                            {sb, (s_.n + 127) / 128, s_.k / 128}, s_.m, s_.n, s_.k);
      else
        gemm_fp8_scaled(test_.runtime(), d, a, {sa, form_ == Form::rows ? s_.m : 1, 1}, b,
                        {sb, 1, form_ == Form::rows ? s_.n : 1}, s_.m, s_.n, s_.k);
    });
  }

  template <typename Launch> void check(const Launch &launch) {
    const std::size_t count = static_cast<std::size_t>(s_.m) * s_.n;
    DeviceBuffer d = test_.poisoned<BFloat16>(count);
    launch(d.as<BFloat16>(), a_on_.as<std::uint8_t>(), sa_on_.as<float>(), b_on_.as<std::uint8_t>(),
           sb_on_.as<float>());
    EXPECT_TRUE(within_fp8_error(test_.download<BFloat16>(d, count), exact_, sizes_));
  }

private:
  GemmFp8GpuTest &test_;
  Shape s_;
  Form form_;
  Quantised a_, b_;
  DeviceBuffer a_on_, b_on_, sa_on_, sb_on_;
  std::vector<double> exact_, sizes_;
};

TEST_F(GemmFp8GpuTest, BlockScaledMatchesTheReferenceOnRaggedAndDeepSeekLikeShapes) {
  std::mt19937 rng(11);
  // The last two take clusters of two blocks and tiles wider than 128 from the heuristic, 600
  // rows an odd count of tiles (a pair's second tile past M).
  for (const Shape s : {Shape{1, 136, 256},
                        {200, 264, 384},
                        {129, 520, 1024},
                        {64, 7168, 512},
                        {300, 2112, 256},
                        {600, 7168, 128},
                        {1400, 2112, 128}}) {
    SCOPED_TRACE(::testing::Message() << s.m << " x " << s.n << " x " << s.k);
    Fp8Case(*this, s, Form::block, rng).check_operator();
  }
}

// Each tile width block scales take, with and without clusters, turns and two k-blocks' sums
// at once (256 columns in halves, A from shared memory or registers), D stored from registers or
// through shared memory and the copy engine (EPILOGUE 1: boxes past N skipped, rows past M and a
// box's columns past N dropped by the engine): widths that do not divide
// 128 put two blocks of B's scales in a tile (at every offset a width's tiles start at), N is no
// multiple of any width, and 300 or 1400 rows leave a cluster's second tile past M; 1400 x 2112
// makes more tiles than blocks, so each block takes several.
TEST_F(GemmFp8GpuTest, BlockScaledTileWidthsAndClustersMatchTheReference) {
  if (const std::string why = without_wgmma(); !why.empty())
    GTEST_SKIP() << why;
  std::mt19937 rng(13);
  struct Variant {
    int block_n, stages, cluster_m, pingpong, overlap = 0, a_registers = 0, epilogue = 0;
  };
  // 640 of K is five k-blocks, 256 two: OVERLAP's pairs of batches end either way.
  for (const Shape s : {Shape{300, 520, 640}, {1400, 2112, 256}}) {
    Fp8Case operands(*this, s, Form::block, rng);
    for (const Variant v :
         {Variant{96, 7, 2, 1},    {112, 7, 1, 0},          {144, 6, 2, 1},
          {160, 6, 1, 1},          {160, 6, 2, 0},          {160, 5, 2, 1},
          {128, 5, 2, 0},          {128, 6, 1, 1},          {64, 6, 1, 0},
          {128, 6, 1, 1, 1},       {128, 5, 2, 0, 1},       {64, 7, 1, 1, 1},
          {256, 4, 1, 0},          {256, 4, 2, 1},          {256, 4, 1, 0, 0, 1},
          {256, 4, 2, 1, 0, 1},    {256, 4, 1, 0, 0, 1, 1}, {256, 4, 2, 0, 0, 1, 1},
          {256, 4, 1, 0, 0, 0, 1}, {128, 6, 1, 1, 1, 0, 1}, {64, 6, 2, 0, 1, 0, 1}}) {
      SCOPED_TRACE(::testing::Message()
                   << "BLOCK_N " << v.block_n << " CLUSTER_M " << v.cluster_m << " PINGPONG "
                   << v.pingpong << " OVERLAP " << v.overlap << " A_REGISTERS " << v.a_registers
                   << " EPILOGUE " << v.epilogue << ", " << s.m << " x " << s.n << " x " << s.k);
      detail::ChosenVariant variant = detail::gemm_fp8_variant(true, false, s.m, s.n);
      variant.params.set("BLOCK_N", v.block_n);
      variant.params.set("STAGES", v.stages);
      variant.params.set("CLUSTER_M", v.cluster_m);
      variant.params.set("PINGPONG", v.pingpong);
      variant.params.set("OVERLAP", v.overlap);
      variant.params.set("A_REGISTERS", v.a_registers);
      variant.params.set("EPILOGUE", v.epilogue);
      operands.check([&](BFloat16 *d, auto *a, auto *sa, auto *b, auto *sb) {
        detail::launch_gemm_fp8_variant(runtime(), variant, d, a, sa, b, sb, s.m, s.n, s.k);
      });
    }
  }
}

TEST_F(GemmFp8GpuTest, PerTensorAndRowWiseMatchTheReferenceWithRaggedK) {
  std::mt19937 rng(12);
  // 600 x 2112 takes clusters of two blocks (three pairs of tiles, the last one's second past M);
  // 64 and 129 rows leave the second half of the last row of tiles past M (not copied).
  for (const Shape s :
       {Shape{1, 136, 400}, {200, 264, 144}, {129, 520, 1024}, {64, 2112, 528}, {600, 2112, 272}})
    for (const bool row_wise : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << s.m << " x " << s.n << " x " << s.k << (row_wise ? " row-wise" : " tensor"));
      Fp8Case(*this, s, row_wise ? Form::rows : Form::tensor, rng).check_operator();
    }
}

// The widths the heuristic takes between 128 and 256 (176 for 2112 columns; 224 and 240 elsewhere)
// with and without clusters (a cluster's halves of B at 88, 112 and 120 rows), on N no multiple of
// any of them and 300 rows (a cluster's second tile past M).
TEST_F(GemmFp8GpuTest, ScaledTileWidthsAndClustersMatchTheReference) {
  if (const std::string why = without_wgmma(); !why.empty())
    GTEST_SKIP() << why;
  std::mt19937 rng(14);
  const Shape s{300, 2112, 272};
  for (const bool row_wise : {false, true}) {
    Fp8Case operands(*this, s, row_wise ? Form::rows : Form::tensor, rng);
    for (const auto &[block_n, stages, cluster_m, epilogue] : {std::tuple{176, 5, 2, 0},
                                                               {176, 5, 1, 0},
                                                               {224, 4, 2, 0},
                                                               {240, 4, 2, 0},
                                                               {240, 4, 1, 0},
                                                               {256, 4, 2, 1},
                                                               {192, 4, 1, 1}}) {
      SCOPED_TRACE(::testing::Message()
                   << "BLOCK_N " << block_n << " CLUSTER_M " << cluster_m << " EPILOGUE "
                   << epilogue << (row_wise ? " row-wise" : " tensor"));
      detail::ChosenVariant variant = detail::gemm_fp8_variant(false, row_wise, s.m, s.n);
      variant.params.set("BLOCK_N", block_n);
      variant.params.set("STAGES", stages);
      variant.params.set("CLUSTER_M", cluster_m);
      variant.params.set("EPILOGUE", epilogue);
      operands.check([&](BFloat16 *d, auto *a, auto *sa, auto *b, auto *sb) {
        detail::launch_gemm_fp8_variant(runtime(), variant, d, a, sa, b, sb, s.m, s.n, s.k);
      });
    }
  }
}

} // namespace
} // namespace kjit::ops

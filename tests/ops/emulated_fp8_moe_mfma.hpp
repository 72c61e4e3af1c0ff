// The body of the emulated tests of AMD's FP8 GEMM and MoE grouped GEMM
// (emulated_fp8_moe_mfma_gfx942_test.cpp, emulated_fp8_moe_mfma_gfx950_test.cpp):
// gemm_fp8_mfma.hip and moe_mfma.hip run on the CPU (tests/ops/kernel_emulation.hpp, with the
// MFMA builtins of tests/ops/emulated_mfma.hpp, fp8 decoded in the target's encoding) for the
// target the including file names, on shapes that are not multiples of the tiles, compared with
// the double-precision references, into poisoned outputs. Included after the kernels, inside the
// file's anonymous namespace; EMULATED_SUITE names the test suite.
//
// What this does not prove: that the hardware's MFMA layouts and fp8 decoding are the documented
// ones, the hardware's rounding inside an MFMA (emulated: one MFMA's 16 products summed in double,
// then added to the float accumulator), timing, and what the compiler does with the source on
// the device (tests/ops/fp8_moe_mfma_code_object_test.cpp reads the code objects instead).

using ::kjit::ops::BFloat16;
using ::kjit::ops::Element;
using ::kjit::ops::Fp8Encoding;
using ::kjit::ops::Half;
namespace gpu_testing = ::kjit::ops::gpu_testing;

#if defined(__gfx950__)
constexpr Fp8Encoding target_encoding = Fp8Encoding::e4m3fn;
#else
constexpr Fp8Encoding target_encoding = Fp8Encoding::e4m3fnuz;
#endif

// ---- fp8 decoding: the emulator's, against values the formats define, and the library's.

TEST(EMULATED_SUITE, TheEmulatorDecodesE4m3fnuzAsDefined) {
  using mfma_fp8_emulation::decode_e4m3fnuz;
  EXPECT_EQ(decode_e4m3fnuz(0x00), 0.0);
  EXPECT_FALSE(std::signbit(decode_e4m3fnuz(0x00)));
  EXPECT_TRUE(std::isnan(decode_e4m3fnuz(0x80))); // where e4m3fn has -0
  EXPECT_EQ(decode_e4m3fnuz(0x01), 0x1p-10);      // the smallest subnormal
  EXPECT_EQ(decode_e4m3fnuz(0x07), 7 * 0x1p-10);  // the largest subnormal
  EXPECT_EQ(decode_e4m3fnuz(0x08), 0x1p-7);       // the smallest normal
  EXPECT_EQ(decode_e4m3fnuz(0x38), 0.5);
  EXPECT_EQ(decode_e4m3fnuz(0x40), 1.0); // bias 8
  EXPECT_EQ(decode_e4m3fnuz(0xc0), -1.0);
  EXPECT_EQ(decode_e4m3fnuz(0x7f), 240.0); // no NaN and no infinity at the top
  EXPECT_EQ(decode_e4m3fnuz(0xff), -240.0);
  int nans = 0;
  for (int bits = 0; bits < 256; ++bits)
    nans += std::isnan(decode_e4m3fnuz(static_cast<std::uint8_t>(bits)));
  EXPECT_EQ(nans, 1);
}

TEST(EMULATED_SUITE, TheEmulatorDecodesOcpE4m3AsDefined) {
  using mfma_fp8_emulation::decode_e4m3fn;
  EXPECT_EQ(decode_e4m3fn(0x00), 0.0);
  EXPECT_EQ(decode_e4m3fn(0x80), 0.0);
  EXPECT_TRUE(std::signbit(decode_e4m3fn(0x80))); // negative zero
  EXPECT_EQ(decode_e4m3fn(0x01), 0x1p-9);
  EXPECT_EQ(decode_e4m3fn(0x08), 0x1p-6);
  EXPECT_EQ(decode_e4m3fn(0x38), 1.0); // bias 7
  EXPECT_EQ(decode_e4m3fn(0x40), 2.0);
  EXPECT_EQ(decode_e4m3fn(0x7e), 448.0);
  EXPECT_EQ(decode_e4m3fn(0xfe), -448.0);
  EXPECT_TRUE(std::isnan(decode_e4m3fn(0x7f)));
  EXPECT_TRUE(std::isnan(decode_e4m3fn(0xff)));
  int nans = 0;
  for (int bits = 0; bits < 256; ++bits)
    nans += std::isnan(decode_e4m3fn(static_cast<std::uint8_t>(bits)));
  EXPECT_EQ(nans, 2);
}

// The same pattern is half as large in e4m3fnuz wherever both encodings have a number.
TEST(EMULATED_SUITE, E4m3fnuzIsHalfOfE4m3fnPatternForPattern) {
  for (int bits = 0; bits < 256; ++bits) {
    const double fnuz = mfma_fp8_emulation::decode_e4m3fnuz(static_cast<std::uint8_t>(bits));
    const double fn = mfma_fp8_emulation::decode_e4m3fn(static_cast<std::uint8_t>(bits));
    if (!std::isnan(fnuz) && !std::isnan(fn)) {
      EXPECT_EQ(fnuz, fn / 2) << bits;
    }
  }
}

// The MFMA builtin decodes the target's encoding, and the library's decoders agree bit for bit.
TEST(EMULATED_SUITE, TheTargetsEncodingIsTheLibrarysForThatTarget) {
  const auto target =
      ::kjit::jit::Target::parse(target_encoding == Fp8Encoding::e4m3fnuz ? "gfx942" : "gfx950");
  EXPECT_EQ(::kjit::ops::gemm_fp8_encoding(target), target_encoding);
  EXPECT_EQ(::kjit::ops::gemm_fp8_encoding(::kjit::jit::Target::parse("sm_90a")),
            Fp8Encoding::e4m3fn);
  for (int value = 0; value < 256; ++value) {
    const auto bits = static_cast<std::uint8_t>(value);
    const double emulated = mfma_fp8_emulation::decode_target_e4m3(bits);
    const double library = target_encoding == Fp8Encoding::e4m3fnuz
                               ? ::kjit::ops::decode_e4m3fnuz(bits)
                               : ::kjit::ops::decode_e4m3(bits);
    if (std::isnan(emulated))
      EXPECT_TRUE(std::isnan(library)) << value;
    else
      EXPECT_EQ(std::bit_cast<std::uint64_t>(emulated), std::bit_cast<std::uint64_t>(library))
          << value;
  }
}

TEST(EMULATED_SUITE, EncodeE4m3fnuzRoundsToNearestEvenAndSaturates) {
  using ::kjit::ops::encode_e4m3fnuz;
  for (int value = 0; value < 256; ++value)
    if (value != 0x80) {
      EXPECT_EQ(encode_e4m3fnuz(mfma_fp8_emulation::decode_e4m3fnuz(value)), value) << value;
    }
  EXPECT_EQ(encode_e4m3fnuz(std::nan("")), 0x80);
  EXPECT_EQ(encode_e4m3fnuz(-0.0), 0x00);     // no negative zero
  EXPECT_EQ(encode_e4m3fnuz(-0x1p-12), 0x00); // rounds to zero: still not 0x80
  EXPECT_EQ(encode_e4m3fnuz(0x1p-11), 0x00);  // half the smallest subnormal: to even, zero
  EXPECT_EQ(encode_e4m3fnuz(3 * 0x1p-11), 0x02);
  EXPECT_EQ(encode_e4m3fnuz(1e6), 0x7f);
  EXPECT_EQ(encode_e4m3fnuz(-1e6), 0xff);
  EXPECT_EQ(encode_e4m3fnuz(1.0 + 1.0 / 16), 0x40); // a tie between 1 and 1.125: to even
  EXPECT_EQ(encode_e4m3fnuz(230), 0x7e);            // nearer 224 than 240
  EXPECT_EQ(encode_e4m3fnuz(232), 0x7e);            // the tie: to even, 224
  EXPECT_EQ(encode_e4m3fnuz(-233), 0xff);           // nearer -240
}

// ---- gemm_fp8_mfma.

// Random bytes of the target's encoding, NaN excluded.
std::vector<std::uint8_t> random_fp8(std::size_t count, std::mt19937 &rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> values(count);
  for (std::uint8_t &value : values)
    do
      value = static_cast<std::uint8_t>(byte(rng));
    while (std::isnan(mfma_fp8_emulation::decode_target_e4m3(value)));
  return values;
}

std::vector<float> random_scales(std::size_t count, std::mt19937 &rng) {
  std::uniform_real_distribution<float> scale(1e-3f, 1e-1f); // amax / 240 or 448 of typical data
  std::vector<float> values(count);
  for (float &value : values)
    value = scale(rng);
  return values;
}

// Each output against the reference within (k / 8 + 8) float roundings of the sum of the
// magnitudes of its products (one per MFMA's addition to its accumulator, and for block scales
// three per 128 of K: the scale's product, the scaling, the addition; then the final scaling),
// plus one rounding to bfloat16.
template <int BLOCK, int SCALING> void check_gemm_fp8_mfma(int m, int n, int k) {
  SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
               ", blocks of " + std::to_string(BLOCK) + ", SCALING " + std::to_string(SCALING));
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 7 + k + SCALING));
  const std::vector<std::uint8_t> a = random_fp8(std::size_t(m) * k, rng);
  const std::vector<std::uint8_t> b = random_fp8(std::size_t(n) * k, rng);
  const int k_blocks = (k + 127) / 128;
  const std::size_t a_scales = SCALING == 0 ? 1 : SCALING == 1 ? m : std::size_t(m) * k_blocks;
  const std::size_t b_scales = SCALING == 0   ? 1
                               : SCALING == 1 ? n
                                              : std::size_t((n + 127) / 128) * k_blocks;
  const std::vector<float> scale_a = random_scales(a_scales, rng);
  const std::vector<float> scale_b = random_scales(b_scales, rng);
  Buffer<BFloat16> d = Buffer<BFloat16>::poisoned(std::size_t(m) * n);
  mfma_emulation::prepare(256);
  ::kjit::emulation::launch(
      {unsigned((n + BLOCK - 1) / BLOCK), unsigned((m + BLOCK - 1) / BLOCK)}, {256}, [&] {
        gemm_fp8_mfma<BLOCK, BLOCK, SCALING>(d.data(), scale_a.data(), scale_b.data(), a.data(),
                                             b.data(), m, n, k);
      });
  const bool block = SCALING == 2;
  const std::vector<double> expected =
      ::kjit::ops::reference::gemm_fp8(a, scale_a, b, scale_b, m, n, k, block, target_encoding);
  // |products|: the same with the sign bits cleared (the scales are positive).
  const auto magnitudes = [](std::vector<std::uint8_t> bytes) {
    for (std::uint8_t &byte : bytes)
      byte &= 0x7f;
    return bytes;
  };
  const std::vector<double> magnitude = ::kjit::ops::reference::gemm_fp8(
      magnitudes(a), scale_a, magnitudes(b), scale_b, m, n, k, block, target_encoding);
  EXPECT_TRUE(gpu_testing::within_bounds(d.values(expected.size()), expected, [&](std::size_t i) {
    return magnitude[i] * (k / 8 + 8) * 0x1p-24 + std::abs(expected[i]) * 0x1p-8;
  }));
  EXPECT_TRUE(d.guard_intact(expected.size()));
}

TEST(EMULATED_SUITE, Fp8PerTensorMatchesTheReference) {
  check_gemm_fp8_mfma<64, 0>(70, 72, 80); // M, N and K past whole tiles
  check_gemm_fp8_mfma<128, 0>(130, 136, 64);
  check_gemm_fp8_mfma<64, 0>(1, 8, 16);
}

TEST(EMULATED_SUITE, Fp8RowWiseMatchesTheReference) {
  check_gemm_fp8_mfma<64, 1>(70, 90, 48); // N not a multiple of 8: the kernel's edges too
  check_gemm_fp8_mfma<128, 1>(129, 128, 96);
}

// Block scales: 128 of K at a time, summed apart and promoted with their two scales.
TEST(EMULATED_SUITE, Fp8BlockScalesMatchTheReference) {
  check_gemm_fp8_mfma<64, 2>(70, 200, 256); // two blocks of B's scales along N
  check_gemm_fp8_mfma<128, 2>(130, 136, 384);
}

// The wrapper's variants: the tiles emulated above, the scaling it is asked for.
TEST(EMULATED_SUITE, TheFp8WrapperPicksTheEmulatedTiles) {
  for (int scaling : {0, 1, 2})
    for (int mn : {256, 4096}) {
      const auto variant = ::kjit::ops::detail::gemm_fp8_mfma_variant(scaling, mn, mn);
      EXPECT_EQ(variant.tmpl->name(), "gemm_fp8_mfma");
      EXPECT_EQ(variant.integer("BLOCK_M"), mn == 256 ? 64 : 128);
      EXPECT_EQ(variant.integer("BLOCK_N"), variant.integer("BLOCK_M"));
      EXPECT_EQ(variant.integer("SCALING"), scaling);
    }
}

// ---- moe_gemm_mfma.

// The grouped GEMM over the blocks moe_align makes of `ids` (`experts` experts), C [rows, n]
// against a double-precision reference per row; rows of blocks the alignment did not use stay
// poisoned. Products of elements in [-1, 1] accumulate in float: k * 2^-22 per sum (as
// emulated_gemm_mfma.hpp), carried through silu(g) * u (|silu'| < 1.1), plus two roundings to T.
template <Element T, int BLOCK_N, int GATED>
void check_moe_gemm_mfma(const std::vector<int> &ids, int experts, int n, int k) {
  using K = typename KernelType<T>::type;
  constexpr int block_m = 128, halves = GATED ? 2 : 1;
  SCOPED_TRACE(std::to_string(ids.size()) + " pairs over " + std::to_string(experts) +
               " experts, n " + std::to_string(n) + ", k " + std::to_string(k) + ", BLOCK_N " +
               std::to_string(BLOCK_N) + ", GATED " + std::to_string(GATED));
  const auto alignment = ::kjit::ops::reference::moe_align(ids, experts, block_m);
  const std::size_t rows =
      ::kjit::ops::moe_align_rows(static_cast<int>(ids.size()), experts, block_m);
  const int used = static_cast<int>(alignment.block_experts.size());
  std::mt19937 rng(static_cast<unsigned>(ids.size() * 31 + n * 7 + k));
  const auto a_values = gpu_testing::random_elements<T>(rows * k, rng, -1, 1);
  const auto w_values =
      gpu_testing::random_elements<T>(std::size_t(experts) * halves * n * k, rng, -1, 1);
  Buffer<T> a(a_values), w(w_values);
  Buffer<T> c = Buffer<T>::poisoned(rows * n);
  // Blocks past the used ones name no expert: reading one would index far outside W.
  std::vector<int> block_experts(rows / block_m, 1 << 24);
  std::copy(alignment.block_experts.begin(), alignment.block_experts.end(), block_experts.begin());
  const std::vector<int> totals = {used, 0};
  mfma_emulation::prepare(256);
  ::kjit::emulation::launch(
      {unsigned((n + BLOCK_N - 1) / BLOCK_N), unsigned(rows / block_m)}, {256}, [&] {
        moe_gemm_mfma<K, BLOCK_N, GATED>(c.data(), a.data(), w.data(), block_experts.data(),
                                         totals.data(), n, k);
      });
  const std::size_t checked = std::size_t(used) * block_m * n;
  std::vector<double> expected(checked), bound(checked);
  for (std::size_t r = 0; r < std::size_t(used) * block_m; ++r) {
    const int e = block_experts[r / block_m];
    for (int col = 0; col < n; ++col) {
      double sums[2] = {0, 0};
      for (int h = 0; h < halves; ++h)
        for (int i = 0; i < k; ++i)
          sums[h] +=
              ::kjit::ops::to_double(a_values[r * k + i]) *
              ::kjit::ops::to_double(w_values[((std::size_t(e) * halves + h) * n + col) * k + i]);
      const double sum_error = k * 0x1p-22, g = sums[0], u = sums[1];
      const double silu = g / (1 + std::exp(-g));
      const double value = GATED ? silu * u : g;
      expected[r * n + col] = value;
      bound[r * n + col] =
          (GATED ? (1.1 * std::abs(u) + std::abs(silu) + sum_error) * sum_error : sum_error) +
          2 * ::kjit::ops::epsilon<T>() * std::abs(value);
    }
  }
  const std::vector<T> got = c.values(rows * n);
  EXPECT_TRUE(gpu_testing::within_bounds(std::vector<T>(got.begin(), got.begin() + checked),
                                         expected, [&](std::size_t i) { return bound[i]; }));
  EXPECT_TRUE(std::all_of(got.begin() + checked, got.end(), [](T value) {
    return ::kjit::testing::is_poison(value);
  })) << "a block past totals[0] wrote";
  EXPECT_TRUE(c.guard_intact(rows * n));
}

// Ragged counts: expert 2 of 5 gets no pair, the others between 3 and 140 (one run past a
// block); N and K past whole tiles.
std::vector<int> ragged_ids() {
  std::vector<int> ids;
  for (const auto &[expert, count] : {std::pair{0, 140}, {1, 3}, {3, 37}, {4, 70}})
    ids.insert(ids.end(), count, expert);
  std::mt19937 rng(7);
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

TEST(EMULATED_SUITE, MoeGatedMatchesTheReferenceWithAnEmptyExpert) {
  check_moe_gemm_mfma<BFloat16, 64, 1>(ragged_ids(), 5, 72, 40);
  check_moe_gemm_mfma<Half, 128, 1>(ragged_ids(), 5, 136, 64);
}

TEST(EMULATED_SUITE, MoeDownProjectionMatchesTheReference) {
  check_moe_gemm_mfma<Half, 64, 0>(ragged_ids(), 5, 72, 40);
  check_moe_gemm_mfma<BFloat16, 128, 0>(ragged_ids(), 5, 128, 32);
}

// Every pair to one expert (the last of 4): one run of two blocks, three experts without rows.
TEST(EMULATED_SUITE, MoeOneExpertTakingEveryRow) {
  check_moe_gemm_mfma<BFloat16, 64, 1>(std::vector<int>(200, 3), 4, 64, 48);
}

TEST(EMULATED_SUITE, TheMoeWrapperPicksTheEmulatedTiles) {
  // 304 compute units (an MI300X): few rows take 64 columns a block, many take 128.
  for (const auto &[pairs, block_n] : {std::pair{64, 64}, {65536, 128}})
    for (bool gated : {true, false}) {
      const auto variant =
          ::kjit::ops::detail::moe_mfma_variant<BFloat16>(gated, pairs, 8, 4096, 304);
      EXPECT_EQ(variant.tmpl->name(), "moe_gemm_mfma");
      EXPECT_EQ(variant.integer("BLOCK_N"), block_n);
      EXPECT_EQ(variant.integer("GATED"), gated ? 1 : 0);
    }
}

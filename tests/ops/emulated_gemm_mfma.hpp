// The body of the emulated MFMA GEMM tests (emulated_mfma_gfx942_test.cpp,
// emulated_mfma_gfx950_test.cpp): gemm_mfma.hip runs on the CPU (tests/ops/kernel_emulation.hpp,
// with the MFMA builtins of tests/ops/emulated_mfma.hpp) for the target the including file names,
// in the tiles kjit::ops::gemm picks and on shapes that are not multiples of them, compared with
// the double-precision reference. Included after the kernel, inside the file's anonymous
// namespace; EMULATED_SUITE names the test suite.
//
// What this does not prove: that the hardware's MFMA layouts are the documented ones, the
// hardware's rounding inside an MFMA (emulated: the products of one MFMA summed in double, then
// added to the float accumulator), LDS bank conflicts, timing, and anything the compiler does
// with the source on the device (tests/ops/gemm_mfma_test.cpp reads the code objects instead).

using ::kjit::ops::BFloat16;
using ::kjit::ops::Element;
using ::kjit::ops::Half;

// Each output is checked against k * 2^-22 (float accumulation over k products of magnitude at
// most 1, twice the bound of one rounding per product) plus one rounding to T, twice over.
template <Element T, int BLOCK, int BLOCK_K> void check_gemm_mfma(int m, int n, int k) {
  using K = typename KernelType<T>::type;
  SCOPED_TRACE(std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k) +
               ", blocks of " + std::to_string(BLOCK) + ", BLOCK_K " + std::to_string(BLOCK_K));
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 7 + k));
  const auto a_values =
      ::kjit::ops::gpu_testing::random_elements<T>(std::size_t(m) * k, rng, -1, 1);
  const auto b_values =
      ::kjit::ops::gpu_testing::random_elements<T>(std::size_t(k) * n, rng, -1, 1);
  Buffer<T> a(a_values), b(b_values);
  Buffer<T> c = Buffer<T>::poisoned(std::size_t(m) * n);
  constexpr unsigned threads = 64 * 2 * 2;
  mfma_emulation::prepare(threads);
  ::kjit::emulation::launch(
      {unsigned((n + BLOCK - 1) / BLOCK), unsigned((m + BLOCK - 1) / BLOCK)}, {threads},
      [&] { gemm_mfma<K, BLOCK, BLOCK, BLOCK_K, 2, 2>(c.data(), a.data(), b.data(), m, n, k); });
  const std::vector<double> expected = ::kjit::ops::reference::gemm<T>(a_values, b_values, m, n, k);
  EXPECT_TRUE(::kjit::ops::gpu_testing::all_close(c.values(expected.size()), expected, k * 0x1p-22,
                                                  2 * ::kjit::ops::epsilon<T>()));
  EXPECT_TRUE(c.guard_intact(expected.size()));
}

// The tiles the wrapper picks, so that the emulated variants are the ones it launches.
TEST(EMULATED_SUITE, TheWrapperPicksTheEmulatedTiles) {
  for (int mn : {256, 4096}) {
    const auto variant = ::kjit::ops::detail::gemm_mfma_variant<Half>(mn, mn);
    EXPECT_EQ(variant.tmpl->name(), "gemm_mfma");
    EXPECT_EQ(variant.integer("BLOCK_M"), mn == 256 ? 64 : 128);
    EXPECT_EQ(variant.integer("BLOCK_N"), variant.integer("BLOCK_M"));
    EXPECT_EQ(variant.integer("BLOCK_K"), 32);
    EXPECT_EQ(variant.integer("WAVES_M"), 2);
    EXPECT_EQ(variant.integer("WAVES_N"), 2);
  }
}

// Ragged edges in every dimension, with 16-byte reads (k and n multiples of 8) and without.
TEST(EMULATED_SUITE, HalfMatchesTheReference) {
  check_gemm_mfma<Half, 64, 32>(70, 90, 40);
  check_gemm_mfma<Half, 64, 32>(64, 64, 33);
  check_gemm_mfma<Half, 128, 32>(130, 136, 72);
}

TEST(EMULATED_SUITE, BFloat16MatchesTheReference) {
  check_gemm_mfma<BFloat16, 64, 32>(70, 90, 40);
  check_gemm_mfma<BFloat16, 64, 32>(1, 1, 1);
  check_gemm_mfma<BFloat16, 128, 32>(129, 128, 64);
}

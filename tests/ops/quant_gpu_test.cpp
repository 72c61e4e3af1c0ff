// Per-token int8 and fp8 quantisation on the device against the double-precision reference.
#include "tests/ops/gpu_support.hpp"

#include <cmath>
#include <cstdint>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

template <Element T> class QuantGpuTest : public OpsGpuTest {
protected:
  // Rows of uniform values whose magnitude differs from row to row (2^-3 to 2^3), so that each row
  // has its own scale; row 2 of a tall enough input is all zeros.
  std::vector<T> rows_of(int rows, int hidden, std::mt19937 &rng) {
    std::vector<T> input;
    for (int row = 0; row < rows; ++row) {
      const double magnitude = row == 2 ? 0.0 : std::ldexp(1.0, row % 7 - 3);
      const auto values = magnitude == 0.0
                              ? std::vector<T>(hidden, from_double<T>(0.0))
                              : gpu_testing::random_elements<T>(hidden, rng, -magnitude, magnitude);
      input.insert(input.end(), values.begin(), values.end());
    }
    return input;
  }
  // Runs quantise(out, scales, input) on the device with `out` poisoned by `poison` and the
  // scales by NaN; checks the scales against `expected_scales` and returns out.
  template <typename Q, typename Quantise>
  std::vector<Q> run(const std::vector<T> &input, const std::vector<double> &expected_scales,
                     unsigned char poison, Quantise quantise) {
    const std::vector<unsigned char> poisoned_out(input.size(), poison);
    DeviceBuffer in = this->upload(input), out = this->device().allocate(input.size());
    out.write(poisoned_out.data(), poisoned_out.size());
    DeviceBuffer scales = this->template poisoned<float>(expected_scales.size());
    quantise(out.as<Q>(), scales.as<float>(), in.as<T>());
    this->device().synchronize();
    std::vector<Q> got(input.size());
    out.read(got.data(), got.size());
    std::vector<float> got_scales(expected_scales.size());
    scales.read(got_scales.data(), got_scales.size() * sizeof(float));
    // A scale is max|x| (exact in float) divided by 127 or 448 in float: one rounding.
    EXPECT_TRUE(gpu_testing::all_close(got_scales, expected_scales, 0.0, 0x1p-23)) << "scales";
    return got;
  }
};
TYPED_TEST_SUITE(QuantGpuTest, gpu_testing::ElementTypes);

struct QuantShape {
  int rows, hidden;
};
// Odd rows, a short odd-ish row, a model's row, a row of no power of two (8-element packs for
// half), and one that allows only single-element accesses.
const QuantShape shapes[] = {{1, 80}, {7, 4096}, {33, 1000}, {5, 4097}};

#define QUANT_TRACE(s) SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.hidden)

TYPED_TEST(QuantGpuTest, Int8MatchesTheReferenceWithinOneUnit) {
  using T = TypeParam;
  std::mt19937 rng(99);
  for (const QuantShape &s : shapes) {
    QUANT_TRACE(s);
    const auto input = this->rows_of(s.rows, s.hidden, rng);
    const auto expected = reference::dynamic_per_token_quant_int8<T>(input, s.rows, s.hidden);
    // Poison: -128, which the operator never writes (|x / scale| <= 127 rounds to at most 127).
    const auto got = this->template run<std::int8_t>(
        input, expected.scales, 0x80, [&](std::int8_t *out, float *scales, const T *in) {
          dynamic_per_token_quant_int8<T>(this->runtime(), out, scales, in, s.rows, s.hidden);
        });
    // x / scale in float differs from the exact quotient by a few float roundings, so a quotient
    // within that of a half-way point may round the other way: one unit at most.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size() && wrong < 5; ++i)
      if (got[i] == -128 || std::abs(got[i] - expected.values[i]) > 1) {
        ++wrong;
        ADD_FAILURE() << "[" << i << "] got " << int(got[i]) << ", expected "
                      << int(expected.values[i]);
      }
  }
}

// One step of e4m3 at the magnitude of `value`: 3 mantissa bits, subnormal below 2^-6.
double e4m3_step(double value) {
  const double magnitude = std::fabs(value);
  return std::ldexp(1.0, (magnitude < 0x1p-6 ? -6 : std::ilogb(magnitude)) - 3);
}

TYPED_TEST(QuantGpuTest, Fp8MatchesTheReferenceWithinOneStepWhereTheTargetHasIt) {
  using T = TypeParam;
  if (!has_fp8_e4m3(this->device().target())) {
    EXPECT_THROW(require_fp8_e4m3(this->device().target()), Error);
    GTEST_SKIP() << this->device().target().id() << " has no fp8 e4m3";
  }
  std::mt19937 rng(7);
  for (const QuantShape &s : shapes) {
    QUANT_TRACE(s);
    const auto input = this->rows_of(s.rows, s.hidden, rng);
    const auto expected = reference::dynamic_per_token_quant_fp8<T>(input, s.rows, s.hidden);
    const auto got = this->template run<std::uint8_t>(
        input, expected.scales, 0xFF /* NaN in e4m3 */,
        [&](std::uint8_t *out, float *scales, const T *in) {
          dynamic_per_token_quant_fp8<T>(this->runtime(), out, scales, in, s.rows, s.hidden);
        });
    // As for int8, a quotient near a half-way point may round to the neighbouring e4m3 value.
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < got.size() && wrong < 5; ++i) {
      const double value = decode_e4m3(got[i]), want = decode_e4m3(expected.values[i]);
      if (!(std::fabs(value - want) <= e4m3_step(want))) {
        ++wrong;
        ADD_FAILURE() << "[" << i << "] got " << value << " (0x" << std::hex << int(got[i])
                      << std::dec << "), expected " << want;
      }
    }
  }
}

} // namespace
} // namespace kjit::ops

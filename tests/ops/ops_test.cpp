// The operators without a GPU: their argument checks (each a clear Error(bad_argument) before
// any device is touched), the launch shapes they pick, the templates' parameter checks, and the
// double-precision references on cases worked out by hand.
#include "kjit/error.hpp"
#include "kjit/ops/ops.hpp"
#include "kjit/templates/library.hpp"
#include "ops/src/launch.hpp"
#include "tests/support/private_config.hpp"
#include "tests/support/temp_dir.hpp"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <vector>

namespace kjit::ops {
namespace {

void expect_error(Errc code, const std::function<void()> &call, const std::string &mentions) {
  try {
    call();
    ADD_FAILURE() << "no kjit::Error thrown; expected one mentioning '" << mentions << "'";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), code) << error.what();
    EXPECT_NE(error.summary().find(mentions), std::string::npos) << error.summary();
  }
}

// Checks happen before the Runtime looks for a device, so these run on any machine; the pointers
// are never dereferenced.
class OpsArguments : public ::testing::Test {
protected:
  OpsArguments() { rt_.emplace(kjit::testing::private_config(dir_)); }
  Runtime &rt() { return *rt_; }
  Half *buffer(std::uintptr_t offset = 0) { return reinterpret_cast<Half *>(0x10000 + offset); }

private:
  kjit::testing::TempDir dir_;
  std::optional<Runtime> rt_;
};

TEST_F(OpsArguments, NormsRefuseBadShapesPointersAndEps) {
  Half *x = buffer(), *out = buffer(1 << 20), *w = buffer(2 << 20);
  const auto bad = Errc::bad_argument;
  expect_error(
      bad, [&] { rms_norm(rt(), out, x, w, 1e-6f, -1, 64); }, "rms_norm: rows is -1");
  expect_error(
      bad, [&] { rms_norm(rt(), out, x, w, 1e-6f, 4, 0); }, "hidden is 0");
  expect_error(
      bad, [&] { rms_norm(rt(), out, x, w, 1e-6f, 4, 32769); }, "[1, 32768]");
  expect_error(
      bad, [&] { rms_norm<Half>(rt(), out, x, nullptr, 1e-6f, 4, 64); }, "weight is null");
  expect_error(
      bad, [&] { rms_norm(rt(), out, x, w, -1.0f, 4, 64); }, "eps is -1");
  expect_error(
      bad, [&] { rms_norm(rt(), out, x, w, NAN, 4, 64); }, "eps is");
  expect_error(
      bad, [&] { layer_norm<Half>(rt(), out, x, w, nullptr, 1e-5f, 4, 64); }, "bias is null");
  expect_error(
      bad, [&] { fused_add_rms_norm(rt(), x, buffer(64), w, 1e-6f, 4, 64); },
      "x and residual overlap");
  expect_error(
      bad, [&] { fused_add_rms_norm<Half>(rt(), nullptr, x, w, 1e-6f, 4, 64); },
      "fused_add_rms_norm: x is null");
}

TEST_F(OpsArguments, SoftmaxRefusesBadMasksAndScales) {
  Half *x = buffer(), *out = buffer(1 << 20);
  const auto bad = Errc::bad_argument;
  expect_error(
      bad, [&] { softmax(rt(), out, x, 1.0f, 6, 64, 4); }, "causal_queries is 4");
  expect_error(
      bad, [&] { softmax(rt(), out, x, 1.0f, 6, 64, -1); }, "causal_queries is -1");
  expect_error(
      bad, [&] { softmax(rt(), out, x, INFINITY, 6, 64); }, "scale is");
  expect_error(
      bad, [&] { softmax(rt(), out, x, 1.0f, 6, 40000); }, "cols is 40000");
  expect_error(
      bad, [&] { softmax<Half>(rt(), nullptr, x, 1.0f, 6, 64); }, "softmax: out is null");
}

TEST_F(OpsArguments, ActivationsRefuseBadSizesPointersAndOverlap) {
  Half *x = buffer(), *out = buffer(1 << 20);
  const auto bad = Errc::bad_argument;
  expect_error(
      bad, [&] { silu(rt(), out, x, -5); }, "silu: n is -5");
  expect_error(
      bad, [&] { gelu<Half>(rt(), nullptr, x, 5); }, "gelu: out is null");
  expect_error(
      bad, [&] { silu_and_mul(rt(), out, x, -1, 8); }, "silu_and_mul: rows is -1");
  expect_error(
      bad, [&] { gelu_and_mul(rt(), out, x, 4, 0); }, "gelu_and_mul: d is 0");
  // out [4, 8] starting inside x [4, 16].
  expect_error(
      bad, [&] { gelu_tanh_and_mul(rt(), buffer(32), x, 4, 8); }, "out and x overlap");
}

TEST_F(OpsArguments, EmptyInputsLaunchNothing) {
  Half *x = buffer(), *out = buffer(1 << 20), *w = buffer(2 << 20);
  // No device is needed (and none may be here): nothing is compiled or launched.
  EXPECT_NO_THROW(rms_norm(rt(), out, x, w, 1e-6f, 0, 64));
  EXPECT_NO_THROW(softmax(rt(), out, x, 1.0f, 0, 64));
  EXPECT_NO_THROW(relu(rt(), out, x, 0));
  EXPECT_NO_THROW(silu_and_mul(rt(), out, x, 0, 8));
  EXPECT_EQ(rt().counters().compiled, 0u);
}

TEST(OpsTemplates, RefuseParametersOutsideTheirSchema) {
  const Template &norm = templates::find("rms_norm");
  expect_error(
      Errc::bad_parameter,
      [&] {
        norm.bind({{"HIDDEN", 0}});
      },
      "HIDDEN");
  expect_error(
      Errc::bad_parameter,
      [&] {
        norm.bind({{"THREADS", 48}});
      },
      "THREADS");
  expect_error(
      Errc::bad_parameter,
      [&] {
        norm.bind({{"T", "double"}});
      },
      "T");
  expect_error(
      Errc::bad_parameter,
      [&] {
        templates::find("activation").bind({{"ACT", "tanh"}});
      },
      "ACT");
  expect_error(
      Errc::bad_parameter,
      [&] {
        templates::find("gated_activation").bind({{"ACT", "relu"}});
      },
      "ACT");
  expect_error(
      Errc::bad_parameter,
      [&] {
        templates::find("softmax").bind({{"HIDDEN", 64}});
      },
      "HIDDEN");
}

TEST(OpsLaunchShape, VectorWidthFollowsAlignmentAndLength) {
  const auto at = [](std::uintptr_t address) { return reinterpret_cast<const void *>(address); };
  EXPECT_EQ(detail::vector_width(2, 8192, {at(4096), at(8192)}), 8); // 16 bytes of halves
  EXPECT_EQ(detail::vector_width(4, 8192, {at(4096)}), 4);           // 16 bytes of floats
  EXPECT_EQ(detail::vector_width(2, 8192, {at(4096), at(4100)}), 2); // one pointer 4-aligned
  EXPECT_EQ(detail::vector_width(2, 8192, {at(4098)}), 1);
  EXPECT_EQ(detail::vector_width(2, 1000, {at(4096)}), 8);
  EXPECT_EQ(detail::vector_width(2, 1002, {at(4096)}), 2); // rows after the first 4-aligned only
  EXPECT_EQ(detail::vector_width(2, 127, {at(4096)}), 1);
  // A flat array: its length does not matter, only the pointers.
  EXPECT_EQ(detail::vector_width(2, {at(4096), at(8192)}), 8);
  EXPECT_EQ(detail::vector_width(4, {at(4096), at(4104)}), 2);
  EXPECT_EQ(detail::vector_width(2, {at(4098)}), 1);
}

TEST(OpsLaunchShape, RowsTakeAWarpOrMoreAndShareBlocksWhenSmall) {
  const void *aligned = reinterpret_cast<const void *>(std::uintptr_t{4096});
  const auto large = detail::row_shape(2, 8192, 32, {aligned}); // 1024 vectors of 8 halves
  EXPECT_EQ(large.vec, 8);
  EXPECT_EQ(large.threads, 256);
  EXPECT_EQ(large.rows_per_block, 1);
  const auto small = detail::row_shape(2, 128, 32, {aligned}); // 16 vectors: one warp per row
  EXPECT_EQ(small.threads, 32);
  EXPECT_EQ(small.rows_per_block, 8);
  const auto wavefront = detail::row_shape(4, 127, 64, {aligned}); // scalar, a wavefront per row
  EXPECT_EQ(wavefront.vec, 1);
  EXPECT_EQ(wavefront.threads, 64);
  EXPECT_EQ(wavefront.rows_per_block, 4);
  const auto longest = detail::row_shape(4, 32768, 32, {aligned}); // 1024 threads of 8 vectors
  EXPECT_EQ(longest.threads, 1024);
  EXPECT_EQ(longest.vec * ((32768 / longest.vec + 1023) / 1024), 32);
}

// The gated kernel counts its vectors in 32-bit integers: a launch's rows must keep them, and the
// index of the block's last thread, below 2^31, and take as many rows as that allows.
TEST(OpsLaunchShape, GatedLaunchesKeepTheirVectorsBelowTwoToThe31) {
  constexpr std::int64_t limit = std::int64_t{1} << 31;
  for (const auto &[d, vec] : {std::pair{4096, 8}, {14336, 8}, {127, 1}, {(1 << 30) - 1, 1}}) {
    SCOPED_TRACE("d " + std::to_string(d) + ", vec " + std::to_string(vec));
    const std::int64_t rows = detail::gated_rows_per_launch(d, vec);
    const std::int64_t vectors = rows * (d / vec);
    const std::int64_t per_block = detail::activation_threads * detail::activation_unroll;
    EXPECT_GE(rows, 1);
    EXPECT_LT((vectors + per_block - 1) / per_block * per_block, limit);
    EXPECT_GT(vectors + d / vec, limit - (1 << 16)); // one more row would not fit
  }
  EXPECT_EQ(detail::gated_rows_per_launch(4096, 8), 4194176); // 32 GiB of half output per launch
}

TEST(OpsReference, RmsNormAndLayerNormByHand) {
  const std::vector<double> x = {3, 4};
  // mean square 12.5
  const auto rms = reference::rms_norm(x, std::vector<double>{1, 2}, 0.0, 1, 2);
  EXPECT_NEAR(rms[0], 3 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(rms[1], 8 / std::sqrt(12.5), 1e-15);
  // mean 2.5, biased variance 1.25
  const auto layer =
      reference::layer_norm(std::vector<double>{1, 2, 3, 4}, std::vector<double>{1, 1, 1, 2},
                            std::vector<double>{0, 0, 1, 0}, 0.0, 1, 4);
  EXPECT_NEAR(layer[0], -1.5 / std::sqrt(1.25), 1e-15);
  EXPECT_NEAR(layer[2], 0.5 / std::sqrt(1.25) + 1, 1e-15);
  EXPECT_NEAR(layer[3], 2 * 1.5 / std::sqrt(1.25), 1e-15);
}

TEST(OpsReference, FusedAddRoundsTheResidualToT) {
  // 1 + 2^-11 lies halfway between two halves and rounds to even: 1. In float it is exact.
  const std::vector<double> x = {1.0, -2.0}, residual = {0x1p-11, 0.0}, w = {1, 1};
  const auto half = reference::fused_add_rms_norm<Half>(x, residual, w, 0.0, 1, 2);
  EXPECT_EQ(half.residual, (std::vector<double>{1.0, -2.0}));
  EXPECT_NEAR(half.out[1], -2 / std::sqrt(2.5), 1e-15);
  const auto single = reference::fused_add_rms_norm<float>(x, residual, w, 0.0, 1, 2);
  EXPECT_EQ(single.residual[0], 1.0 + 0x1p-11);
}

TEST(OpsReference, SoftmaxWithScaleAndCausalMask) {
  const auto plain = reference::softmax(std::vector<double>{0, std::log(3.0) / 2}, 2.0, 1, 2);
  EXPECT_NEAR(plain[0], 0.25, 1e-15);
  EXPECT_NEAR(plain[1], 0.75, 1e-15);
  // Two matrices of 2 queries over 3 keys: query 0 sees keys 0 and 1, query 1 all three.
  const auto causal = reference::softmax(std::vector<double>(12, 0.0), 1.0, 4, 3, 2);
  EXPECT_EQ(causal, (std::vector<double>{0.5, 0.5, 0, 1 / 3., 1 / 3., 1 / 3., //
                                         0.5, 0.5, 0, 1 / 3., 1 / 3., 1 / 3.}));
  // More queries than keys: query 0 of 4 over 3 keys sees none and is all zeros.
  const auto none = reference::softmax(std::vector<double>(12, 1.0), 1.0, 4, 3, 4);
  EXPECT_EQ(none[0] + none[1] + none[2], 0.0);
  EXPECT_EQ(none[3], 1.0);
}

TEST(OpsReference, ActivationsByHand) {
  EXPECT_NEAR(reference::silu(1.0), 0.7310585786300049, 1e-15);
  EXPECT_NEAR(reference::sigmoid(0.0), 0.5, 1e-15);
  EXPECT_NEAR(reference::gelu(1.0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(reference::gelu_tanh(1.0), 0.8411919906082768, 1e-15);
  EXPECT_EQ(reference::relu(-1.0), 0.0);
  EXPECT_TRUE(std::isnan(reference::relu(NAN)));
  const auto gated = reference::gated(reference::silu, std::vector<double>{1, 0, 2, 5}, 1, 2);
  EXPECT_NEAR(gated[0], 2 * 0.7310585786300049, 1e-15);
  EXPECT_EQ(gated[1], 0.0);
}

} // namespace
} // namespace kjit::ops

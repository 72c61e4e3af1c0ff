// RMSNorm, fused add + RMSNorm, LayerNorm and softmax on the GPU against their double-precision
// references: fresh random inputs, poisoned outputs with a guard band past the end, rows of odd
// and vector-friendly lengths, row counts that leave a block partly empty, pointers that force
// the scalar path, for float, half and bfloat16.
//
// Tolerances. The inputs are the T values themselves (the references see exactly what the GPU
// reads), so the error is the kernel's float arithmetic plus one rounding to T. The float part:
// a row sum or maximum of up to 32768 terms taken as at most 40 sequential additions per thread
// and a tree of at most 10 levels (relative error below 50 * 2^-24), rsqrtf and __expf (a few
// units of float's last place; __expf's argument is at most ~16 here): below 2^-17 relative in
// all. The rounding to T is half of epsilon<T>(). So every check allows epsilon<T>() + 2^-16
// relative, plus an absolute term that covers half's subnormal spacing (2^-24) and, for
// LayerNorm, the centring: (x - mean) carries the float error of the mean, about 2^-17 of the
// inputs' magnitude (|x| <= 2), whatever the result's size.
#include "tests/ops/gpu_support.hpp"
#include "tests/ops/guarded.hpp"

#include <random>

namespace kjit::ops::gpu_testing {
namespace {

template <Element T> double relative_tolerance() { return epsilon<T>() + 0x1p-16; }

struct Shape {
  int rows;
  int hidden;
};

// Every length for half (the type the model code uses most); a few, odd and even, for the others.
template <Element T> std::vector<Shape> shapes() {
  if (std::is_same_v<T, Half>)
    return {{1, 1},    {33, 3},   {7, 127},  {33, 128}, {7, 1000},
            {5, 4096}, {3, 5120}, {2, 8192}, {2, 32768}};
  return {{33, 3}, {7, 1000}, {3, 8192}};
}

template <typename T> class RowwiseGpu : public TypedOpsGpuTest<T> {
protected:
  void check_softmax(int rows, int cols, float scale, int queries) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", cols " + std::to_string(cols) +
                 ", causal_queries " + std::to_string(queries));
    const std::size_t count = static_cast<std::size_t>(rows) * cols;
    const auto x = random_elements<T>(count, this->rng, -4.0, 4.0);
    DeviceBuffer dx = this->upload(x);
    DeviceBuffer out = this->template poisoned<T>(count + guard_elements);
    softmax(this->runtime(), out.as<T>(), dx.as<T>(), scale, rows, cols, queries);
    const auto expected = reference::softmax(to_doubles(x), scale, rows, cols, queries);
    EXPECT_TRUE(all_close(this->template download<T>(out, count), expected, 0x1p-24,
                          relative_tolerance<T>()));
    EXPECT_TRUE(guard_intact<T>(out, count));
  }
};
TYPED_TEST_SUITE(RowwiseGpu, ElementTypes);

TYPED_TEST(RowwiseGpu, RmsNormMatchesReference) {
  using T = TypeParam;
  for (const auto [rows, hidden] : shapes<T>()) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", hidden " + std::to_string(hidden));
    const std::size_t count = static_cast<std::size_t>(rows) * hidden;
    const auto x = random_elements<T>(count, this->rng, -2.0, 2.0);
    const auto w = random_elements<T>(hidden, this->rng, 0.5, 1.5);
    DeviceBuffer dx = this->upload(x), dw = this->upload(w);
    DeviceBuffer out = this->template poisoned<T>(count + guard_elements);
    rms_norm(this->runtime(), out.as<T>(), dx.as<T>(), dw.as<T>(), 1e-6f, rows, hidden);
    const auto expected = reference::rms_norm(to_doubles(x), to_doubles(w), 1e-6f, rows, hidden);
    EXPECT_TRUE(all_close(this->template download<T>(out, count), expected, 0x1p-20,
                          relative_tolerance<T>()));
    EXPECT_TRUE(guard_intact<T>(out, count));
  }
}

// In place (out == x) and from pointers one element off 16-byte alignment (the scalar path).
TYPED_TEST(RowwiseGpu, RmsNormInPlaceAndUnaligned) {
  using T = TypeParam;
  const int rows = 7, hidden = 4096;
  const std::size_t count = static_cast<std::size_t>(rows) * hidden;
  const auto x = random_elements<T>(count + 1, this->rng, -2.0, 2.0);
  const auto w = random_elements<T>(hidden + 1, this->rng, 0.5, 1.5);
  DeviceBuffer dx = this->upload(with_guard(x)), dw = this->upload(w);
  T *data = dx.as<T>() + 1; // every row now starts one element past a 16-byte boundary
  rms_norm(this->runtime(), data, data, dw.as<T>() + 1, 1e-5f, rows, hidden);
  const auto all = to_doubles(x), weight = to_doubles(w);
  const auto expected = reference::rms_norm(std::span(all).subspan(1), std::span(weight).subspan(1),
                                            1e-5f, rows, hidden);
  const auto got = this->template download<T>(dx, count + 1);
  EXPECT_EQ(to_double(got[0]), all[0]) << "the element before the rows was written";
  EXPECT_TRUE(all_close(std::span<const T>(got).subspan(1), std::span<const double>(expected),
                        0x1p-20, relative_tolerance<T>()));
  EXPECT_TRUE(guard_intact<T>(dx, count + 1));
}

TYPED_TEST(RowwiseGpu, FusedAddRmsNormWritesResidualAndOutput) {
  using T = TypeParam;
  for (const auto [rows, hidden] : shapes<T>()) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", hidden " + std::to_string(hidden));
    const std::size_t count = static_cast<std::size_t>(rows) * hidden;
    const auto x = random_elements<T>(count, this->rng, -2.0, 2.0);
    const auto residual = random_elements<T>(count, this->rng, -2.0, 2.0);
    const auto w = random_elements<T>(hidden, this->rng, 0.5, 1.5);
    DeviceBuffer dx = this->upload(with_guard(x)), dr = this->upload(with_guard(residual));
    DeviceBuffer dw = this->upload(w);
    fused_add_rms_norm(this->runtime(), dx.as<T>(), dr.as<T>(), dw.as<T>(), 1e-6f, rows, hidden);
    const auto expected = reference::fused_add_rms_norm<T>(to_doubles(x), to_doubles(residual),
                                                           to_doubles(w), 1e-6f, rows, hidden);
    // The residual is one float addition rounded to T: exactly the reference's.
    EXPECT_TRUE(all_close(this->template download<T>(dr, count), expected.residual, 0.0, 0.0));
    EXPECT_TRUE(all_close(this->template download<T>(dx, count), expected.out, 0x1p-20,
                          relative_tolerance<T>()));
    EXPECT_TRUE(guard_intact<T>(dx, count));
    EXPECT_TRUE(guard_intact<T>(dr, count));
  }
}

TYPED_TEST(RowwiseGpu, LayerNormMatchesReference) {
  using T = TypeParam;
  for (const auto [rows, hidden] : shapes<T>()) {
    SCOPED_TRACE("rows " + std::to_string(rows) + ", hidden " + std::to_string(hidden));
    const std::size_t count = static_cast<std::size_t>(rows) * hidden;
    // Off-centre inputs, so that a mean taken wrongly shows.
    const auto x = random_elements<T>(count, this->rng, -1.0, 2.0);
    const auto w = random_elements<T>(hidden, this->rng, 0.5, 1.5);
    const auto b = random_elements<T>(hidden, this->rng, -0.5, 0.5);
    DeviceBuffer dx = this->upload(x), dw = this->upload(w), db = this->upload(b);
    DeviceBuffer out = this->template poisoned<T>(count + guard_elements);
    layer_norm(this->runtime(), out.as<T>(), dx.as<T>(), dw.as<T>(), db.as<T>(), 1e-5f, rows,
               hidden);
    const auto expected =
        reference::layer_norm(to_doubles(x), to_doubles(w), to_doubles(b), 1e-5f, rows, hidden);
    EXPECT_TRUE(all_close(this->template download<T>(out, count), expected, 0x1p-14,
                          relative_tolerance<T>()));
    EXPECT_TRUE(guard_intact<T>(out, count));
  }
}

TYPED_TEST(RowwiseGpu, SoftmaxMatchesReference) {
  for (const auto [rows, cols] : shapes<TypeParam>())
    for (const int queries : {0, rows})
      this->check_softmax(rows, cols, 0.7f, queries);
}

// Batches of causal matrices whose queries outnumber the keys: the first rows see nothing.
TYPED_TEST(RowwiseGpu, SoftmaxCausalBatchesWithFullyMaskedRows) {
  this->check_softmax(36, 8, 1.0f, 12);
}

} // namespace
} // namespace kjit::ops::gpu_testing

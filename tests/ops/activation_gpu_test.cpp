// The activations on the GPU against their double-precision references: fresh random inputs,
// poisoned outputs with a guard band past the end, sizes that leave a vector tail or a partly
// empty block, pointers that force the scalar path, for float, half and bfloat16.
//
// Tolerances. The inputs are the T values themselves, so the error is the kernel's float
// arithmetic plus one rounding to T (half of epsilon<T>()). The float part: __expf is within
// about 2^-21 relative for the arguments here (|x| <= 6), erff and tanhf within a few units of
// float's last place, and 1 + erf(x) or 1 + tanh(x) cancel for negative x, which turns those
// units into an absolute error of about 2^-22 * |x| in the result. So every check allows
// epsilon<T>() + 2^-18 relative and 2^-18 absolute (2^-16 for the gated forms, whose gate
// multiplies it by |x[r, d + i]| <= 6).
#include "tests/ops/gpu_support.hpp"
#include "tests/ops/guarded.hpp"

#include <random>

namespace kjit::ops::gpu_testing {
namespace {

template <Element T> double relative_tolerance() { return epsilon<T>() + 0x1p-18; }

template <Element T> using Elementwise = void (*)(Runtime &, T *, const T *, std::int64_t, Stream);
template <Element T> using Gated = void (*)(Runtime &, T *, const T *, int, int, Stream);

template <Element T> struct Activation {
  const char *name;
  Elementwise<T> op;
  Gated<T> gated; // nullptr: no gated form
  double (*reference)(double);
};

template <Element T> std::vector<Activation<T>> activations() {
  return {{"silu", silu<T>, silu_and_mul<T>, reference::silu},
          {"gelu", gelu<T>, gelu_and_mul<T>, reference::gelu},
          {"gelu_tanh", gelu_tanh<T>, gelu_tanh_and_mul<T>, reference::gelu_tanh},
          {"relu", relu<T>, nullptr, reference::relu},
          {"sigmoid", sigmoid<T>, nullptr, reference::sigmoid}};
}

template <typename T> class ActivationGpu : public TypedOpsGpuTest<T> {};
TYPED_TEST_SUITE(ActivationGpu, ElementTypes);

// n: a single element; a vector tail (n % 8 != 0) in one partly empty block; several blocks.
TYPED_TEST(ActivationGpu, ElementwiseMatchesReference) {
  using T = TypeParam;
  for (const auto &activation : activations<T>()) {
    for (const std::int64_t n : {1, 1000003, 3 << 20}) {
      SCOPED_TRACE(std::string(activation.name) + ", n " + std::to_string(n));
      const auto x = random_elements<T>(static_cast<std::size_t>(n), this->rng, -6.0, 6.0);
      DeviceBuffer dx = this->upload(x);
      DeviceBuffer out = this->template poisoned<T>(static_cast<std::size_t>(n) + guard_elements);
      activation.op(this->runtime(), out.as<T>(), dx.as<T>(), n, nullptr);
      std::vector<double> expected = to_doubles(x);
      for (double &value : expected)
        value = activation.reference(value);
      EXPECT_TRUE(all_close(this->template download<T>(out, static_cast<std::size_t>(n)), expected,
                            0x1p-18, relative_tolerance<T>()));
      EXPECT_TRUE(guard_intact<T>(out, static_cast<std::size_t>(n)));
    }
  }
}

// In place, from a pointer one element past 16-byte alignment: the scalar variant.
TYPED_TEST(ActivationGpu, ElementwiseInPlaceUnaligned) {
  using T = TypeParam;
  const std::size_t n = 4099;
  const auto x = random_elements<T>(n + 1, this->rng, -6.0, 6.0);
  DeviceBuffer dx = this->upload(with_guard(x));
  silu(this->runtime(), dx.as<T>() + 1, dx.as<T>() + 1, static_cast<std::int64_t>(n));
  std::vector<double> expected = to_doubles(x);
  for (std::size_t i = 1; i <= n; ++i)
    expected[i] = reference::silu(expected[i]);
  EXPECT_TRUE(
      all_close(this->template download<T>(dx, n + 1), expected, 0x1p-18, relative_tolerance<T>()));
  EXPECT_TRUE(guard_intact<T>(dx, n + 1));
}

// d: odd (scalar), a multiple of 8 and of the block's reach, and a long row that takes more
// than one pass of the block; rows that are not a multiple of anything.
TYPED_TEST(ActivationGpu, GatedMatchesReference) {
  using T = TypeParam;
  const struct { int rows, d; } shapes[] = {{1, 1}, {7, 127}, {33, 4096}, {3, 14336}, {2, 40000}};
  for (const auto &activation : activations<T>()) {
    if (activation.gated == nullptr)
      continue;
    for (const auto [rows, d] : shapes) {
      SCOPED_TRACE(std::string(activation.name) + "_and_mul, rows " + std::to_string(rows) +
                   ", d " + std::to_string(d));
      const std::size_t count = static_cast<std::size_t>(rows) * d;
      const auto x = random_elements<T>(2 * count, this->rng, -6.0, 6.0);
      DeviceBuffer dx = this->upload(x);
      DeviceBuffer out = this->template poisoned<T>(count + guard_elements);
      activation.gated(this->runtime(), out.as<T>(), dx.as<T>(), rows, d, nullptr);
      const auto expected = reference::gated(activation.reference, to_doubles(x), rows, d);
      EXPECT_TRUE(all_close(this->template download<T>(out, count), expected, 0x1p-16,
                            relative_tolerance<T>()));
      EXPECT_TRUE(guard_intact<T>(out, count));
    }
  }
}

} // namespace
} // namespace kjit::ops::gpu_testing

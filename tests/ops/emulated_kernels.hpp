// The body of the emulated kernel tests (emulated_warp32_test.cpp, emulated_warp64_test.cpp):
// the row-wise and activation kernels run on the CPU (tests/ops/kernel_emulation.hpp) in the
// launch shapes the operators pick for the warp size KJIT_WARP_SIZE, compared with the
// double-precision references. Included by each file after the kernels, inside its anonymous
// namespace; EMULATED_SUITE names the test suite.
//
// Tolerances: the emulation computes in float as the GPU does, with exact exp and 1/sqrt where
// the GPU approximates, so the checks allow one unit of T plus 2^-16 relative (the float
// arithmetic of sums over at most 4096 terms), and small absolute terms for results near zero
// (as tests/ops/rowwise_gpu_test.cpp explains).

using ::kjit::ops::BFloat16;
using ::kjit::ops::Element;
using ::kjit::ops::Half;
namespace reference = ::kjit::ops::reference;
namespace detail = ::kjit::ops::detail;
using ::kjit::ops::gpu_testing::all_close;
using ::kjit::ops::gpu_testing::random_elements;
using ::kjit::ops::gpu_testing::to_doubles;

#include "tests/ops/emulated_buffer.hpp"

template <Element T> double tolerance() { return ::kjit::ops::epsilon<T>() + 0x1p-16; }

// The shape the operators pick for rows of LENGTH at 16-byte aligned pointers.
template <Element T, int LENGTH> constexpr detail::RowShape aligned_shape() {
  int vec = static_cast<int>(16 / sizeof(T));
  while (LENGTH % vec != 0)
    vec /= 2;
  return detail::row_shape(vec, LENGTH, KJIT_WARP_SIZE);
}

::kjit::emulation::EmulatedLaunch rows_launch(const detail::RowShape &shape, int rows) {
  return {{static_cast<unsigned>((rows + shape.rows_per_block - 1) / shape.rows_per_block)},
          {static_cast<unsigned>(shape.threads), static_cast<unsigned>(shape.rows_per_block)}};
}

template <Element T, int HIDDEN> void check_rowwise(int rows) {
  using K = typename KernelType<T>::type;
  constexpr detail::RowShape shape = aligned_shape<T, HIDDEN>();
  constexpr int VEC = shape.vec, THREADS = shape.threads;
  SCOPED_TRACE("rows " + std::to_string(rows) + ", hidden " + std::to_string(HIDDEN) + ", VEC " +
               std::to_string(VEC) + ", THREADS " + std::to_string(THREADS));
  std::mt19937 rng(HIDDEN);
  const std::size_t count = static_cast<std::size_t>(rows) * HIDDEN;
  const auto x = random_elements<T>(count, rng, -1.0, 2.0);
  const auto residual = random_elements<T>(count, rng, -2.0, 2.0);
  const auto w = random_elements<T>(HIDDEN, rng, 0.5, 1.5);
  const auto b = random_elements<T>(HIDDEN, rng, -0.5, 0.5);
  Buffer<T> dx(x), dr(residual), dw(w), db(b);
  // What the host picks at these pointers (std::vector's storage is 16-byte aligned).
  const detail::RowShape picked =
      detail::row_shape(sizeof(T), HIDDEN, KJIT_WARP_SIZE, {dx.data(), dw.data(), db.data()});
  ASSERT_EQ(picked.vec, VEC);
  ASSERT_EQ(picked.threads, THREADS);
  ASSERT_EQ(picked.rows_per_block, shape.rows_per_block);
  const auto [grid, block] = rows_launch(shape, rows);

  auto out = Buffer<T>::poisoned(count);
  ::kjit::emulation::launch(grid, block, [&] {
    rms_norm<K, HIDDEN, VEC, THREADS>(out.data(), dx.data(), dw.data(), 1e-6f, rows);
  });
  EXPECT_TRUE(all_close(out.values(count),
                        reference::rms_norm(to_doubles(x), to_doubles(w), 1e-6f, rows, HIDDEN),
                        0x1p-20, tolerance<T>()))
      << "rms_norm";
  EXPECT_TRUE(out.guard_intact(count)) << "rms_norm";

  out = Buffer<T>::poisoned(count);
  ::kjit::emulation::launch(grid, block, [&] {
    layer_norm<K, HIDDEN, VEC, THREADS>(out.data(), dx.data(), dw.data(), db.data(), 1e-5f, rows);
  });
  EXPECT_TRUE(all_close(
      out.values(count),
      reference::layer_norm(to_doubles(x), to_doubles(w), to_doubles(b), 1e-5f, rows, HIDDEN),
      0x1p-14, tolerance<T>()))
      << "layer_norm";
  EXPECT_TRUE(out.guard_intact(count)) << "layer_norm";

  for (const int queries : {0, rows}) {
    out = Buffer<T>::poisoned(count);
    ::kjit::emulation::launch(grid, block, [&] {
      softmax<K, HIDDEN, VEC, THREADS>(out.data(), dx.data(), 0.7f, rows, queries);
    });
    EXPECT_TRUE(all_close(out.values(count),
                          reference::softmax(to_doubles(x), 0.7f, rows, HIDDEN, queries), 0x1p-24,
                          tolerance<T>()))
        << "softmax, causal_queries " << queries;
    EXPECT_TRUE(out.guard_intact(count)) << "softmax";
  }

  ::kjit::emulation::launch(grid, block, [&] {
    fused_add_rms_norm<K, HIDDEN, VEC, THREADS>(dx.data(), dr.data(), dw.data(), 1e-6f, rows);
  });
  const auto expected = reference::fused_add_rms_norm<T>(to_doubles(x), to_doubles(residual),
                                                         to_doubles(w), 1e-6f, rows, HIDDEN);
  EXPECT_TRUE(all_close(dr.values(count), expected.residual, 0.0, 0.0)) << "fused residual";
  EXPECT_TRUE(all_close(dx.values(count), expected.out, 0x1p-20, tolerance<T>())) << "fused out";
  EXPECT_TRUE(dx.guard_intact(count) && dr.guard_intact(count)) << "fused_add_rms_norm";
}

template <Element T> void check_rowwise_all() {
  // Row counts that leave the last block of several rows part empty, kept small: each
  // reduction step is a barrier of every emulated thread.
  check_rowwise<T, 1>(5);
  check_rowwise<T, 3>(9);
  check_rowwise<T, 127>(3);
  check_rowwise<T, 128>(9);
  check_rowwise<T, 1000>(2);
  check_rowwise<T, 4096>(2);
}

TEST(EMULATED_SUITE, RowwiseFloat) { check_rowwise_all<float>(); }
TEST(EMULATED_SUITE, RowwiseHalf) { check_rowwise_all<Half>(); }
TEST(EMULATED_SUITE, RowwiseBFloat16) { check_rowwise_all<BFloat16>(); }

// Element-wise over n elements from `offset` elements into the buffers (0: 16-byte aligned).
template <Element T, typename ACT>
void check_activation(std::int64_t n, int offset, double (*f)(double)) {
  using K = typename KernelType<T>::type;
  SCOPED_TRACE("n " + std::to_string(n) + ", offset " + std::to_string(offset));
  std::mt19937 rng(static_cast<unsigned>(n));
  const auto x = random_elements<T>(static_cast<std::size_t>(n + offset), rng, -6.0, 6.0);
  Buffer<T> dx(x);
  auto out = Buffer<T>::poisoned(static_cast<std::size_t>(n + offset));
  const int vec = detail::vector_width(sizeof(T), {out.data() + offset, dx.data() + offset});
  ASSERT_EQ(vec, offset == 0 ? static_cast<int>(16 / sizeof(T)) : 1);
  const EmulatedDim3 grid{static_cast<unsigned>(detail::activation_blocks(n, vec))};
  const EmulatedDim3 block{detail::activation_threads};
  const auto run = [&]<int VEC>() {
    ::kjit::emulation::launch(
        grid, block, [&] { activation<ACT, K, VEC>(out.data() + offset, dx.data() + offset, n); });
  };
  vec == 1 ? run.template operator()<1>() : run.template operator()<16 / sizeof(T)>();
  std::vector<double> expected = to_doubles(x);
  for (std::size_t i = offset; i < expected.size(); ++i)
    expected[i] = f(expected[i]);
  auto got = out.values(static_cast<std::size_t>(n + offset));
  std::copy(x.begin(), x.begin() + offset, got.begin()); // not the kernel's to write
  EXPECT_TRUE(all_close(got, expected, 0x1p-18, tolerance<T>()));
  EXPECT_TRUE(out.guard_intact(static_cast<std::size_t>(n + offset)));
}

template <Element T, typename ACT> void check_gated(int rows, int d, double (*f)(double)) {
  using K = typename KernelType<T>::type;
  SCOPED_TRACE("rows " + std::to_string(rows) + ", d " + std::to_string(d));
  std::mt19937 rng(static_cast<unsigned>(d));
  const std::size_t count = static_cast<std::size_t>(rows) * d;
  const auto x = random_elements<T>(2 * count, rng, -6.0, 6.0);
  Buffer<T> dx(x);
  auto out = Buffer<T>::poisoned(count);
  const int vec = detail::vector_width(sizeof(T), d, {out.data(), dx.data()});
  ASSERT_GE(detail::gated_rows_per_launch(d, vec), rows); // one launch, as the operator's
  const auto elements = static_cast<std::int64_t>(count);
  const EmulatedDim3 grid{static_cast<unsigned>(detail::activation_blocks(elements, vec))};
  const EmulatedDim3 block{detail::activation_threads};
  const auto run = [&]<int VEC>() {
    ::kjit::emulation::launch(grid, block, [&] {
      gated_activation<ACT, K, VEC>(out.data(), dx.data(), d, static_cast<int>(elements / VEC));
    });
  };
  switch (vec) {
  case 1:
    run.template operator()<1>();
    break;
  case 2:
    run.template operator()<2>();
    break;
  case 4:
    run.template operator()<4>();
    break;
  default:
    run.template operator()<8>();
    break;
  }
  EXPECT_TRUE(all_close(out.values(count), reference::gated(f, to_doubles(x), rows, d), 0x1p-16,
                        tolerance<T>()));
  EXPECT_TRUE(out.guard_intact(count));
}

template <Element T> void check_activations() {
  check_activation<T, silu>(20011, 0, reference::silu); // several blocks and a vector tail
  check_activation<T, silu>(3, 0, reference::silu);     // the tail alone
  check_activation<T, silu>(4099, 1, reference::silu);  // scalar
  check_activation<T, gelu>(2053, 0, reference::gelu);
  check_activation<T, gelu_tanh>(2053, 0, reference::gelu_tanh);
  check_activation<T, relu>(2053, 0, reference::relu);
  check_activation<T, sigmoid>(2053, 0, reference::sigmoid);
  check_gated<T, silu>(3, 1, reference::silu);
  check_gated<T, gelu>(5, 127, reference::gelu);
  check_gated<T, gelu_tanh>(2, 4096, reference::gelu_tanh);
  check_gated<T, silu>(2, 40000, reference::silu); // rows across blocks, blocks across rows
}

TEST(EMULATED_SUITE, ActivationsFloat) { check_activations<float>(); }
TEST(EMULATED_SUITE, ActivationsHalf) { check_activations<Half>(); }
TEST(EMULATED_SUITE, ActivationsBFloat16) { check_activations<BFloat16>(); }

#include "kjit/ops/gemm.hpp"

#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "variants.hpp"

#include <algorithm>
#include <string>
#include <type_traits>

namespace kjit::ops {

namespace {

constexpr std::string_view op = "gemm";

// 128 x 128 tiles reuse each staged element twice as often as 64 x 64 ones, but only pay when
// there are enough of them to keep every multiprocessor busy (an H200 has 132, an MI250X GCD
// 110): below about two per multiprocessor, the smaller tiles' extra blocks win.
bool large_tiles_pay(int m, int n) {
  return static_cast<long long>(detail::divide_up(m, 128)) * detail::divide_up(n, 128) >= 256;
}

void check_operands(const void *c, const void *a, const void *b, int m, int n, int k) {
  detail::require_pointer(c, op, "c");
  detail::require_pointer(a, op, "a");
  detail::require_pointer(b, op, "b");
  detail::require(m > 0 && n > 0 && k > 0, op, [&] {
    return "m, n and k must be positive, not " + std::to_string(m) + ", " + std::to_string(n) +
           ", " + std::to_string(k);
  });
}

// The grid of blocks of block_m x block_n over C: columns in x, rows in y (at most 65535).
Dim3 grid_for(int m, int n, int block_m, int block_n) {
  const int grid_rows = detail::divide_up(m, block_m);
  detail::require(grid_rows <= 65535, op, [&] {
    return "m = " + std::to_string(m) + " needs more than 65535 rows of blocks";
  });
  return Dim3(detail::divide_up(n, block_n), grid_rows);
}

template <Element T>
void gemm_on_tensor_cores(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k,
                          Stream stream) {
  const detail::ChosenVariant variant = detail::gemm_mma_variant<T>(m, n);
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  const int block = variant.integer("BLOCK_M");
  kernel.launch({.grid = grid_for(m, n, block, block),
                 .block = 32 * variant.integer("WARPS_M") * variant.integer("WARPS_N"),
                 .stream = stream},
                c, a, b, m, n, k);
}

} // namespace

namespace detail {

template <Element T> ChosenVariant gemm_mma_variant(int m, int n) {
  // 8 warps of 64 x 32 on 128 x 128 blocks, or 4 warps of 32 x 32 on 64 x 64 ones.
  const bool large = large_tiles_pay(m, n);
  const int block = large ? 128 : 64, warps_m = 2, warps_n = large ? 4 : 2;
  static const Template &tmpl = templates::find("gemm_mma");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"BLOCK_M", block},
           {"BLOCK_N", block},
           {"BLOCK_K", 32},
           {"WARPS_M", warps_m},
           {"WARPS_N", warps_n}}};
}

template <Element T> ChosenVariant gemm_variant(const GemmTiles &tiles) {
  static const Template &tmpl = templates::find("gemm");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"BLOCK_M", tiles.block_m},
           {"BLOCK_N", tiles.block_n},
           {"BLOCK_K", tiles.block_k},
           {"THREAD_M", tiles.thread_m},
           {"THREAD_N", tiles.thread_n}}};
}

} // namespace detail

GemmTiles gemm_tiles_for(int m, int n, int /*k*/) {
  if (large_tiles_pay(m, n))
    return {128, 128, 16, 8, 8};
  return {64, 64, 16, 4, 4};
}

template <Element T> bool gemm_has_tensor_cores(const jit::Target &target) {
  return !std::is_same_v<T, float> && detail::nvidia_compute_capability(target) >= 80;
}

template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, const GemmTiles &tiles,
          Stream stream) {
  check_operands(c, a, b, m, n, k);
  detail::require(tiles.thread_m > 0 && tiles.thread_n > 0 && tiles.block_m % tiles.thread_m == 0 &&
                      tiles.block_n % tiles.thread_n == 0,
                  op, "thread tiles must divide the block tiles");
  const int threads = (tiles.block_m / tiles.thread_m) * (tiles.block_n / tiles.thread_n);
  detail::require(threads >= 32 && threads <= 1024, op, [&] {
    return "tiles give " + std::to_string(threads) +
           " threads per block; (block_m / thread_m) * (block_n / thread_n) must be "
           "in [32, 1024]";
  });
  detail::require(tiles.block_k * (tiles.block_m + 4 + tiles.block_n) * 4 <= 48 * 1024, op,
                  "tiles need more than 48 KiB of shared memory");
  const Dim3 grid = grid_for(m, n, tiles.block_m, tiles.block_n);
  const detail::ChosenVariant variant = detail::gemm_variant<T>(tiles);
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  kernel.launch({.grid = grid, .block = threads, .stream = stream}, c, a, b, m, n, k);
}

template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, Stream stream) {
  check_operands(c, a, b, m, n, k); // before the device is looked for
  if (gemm_has_tensor_cores<T>(rt.default_device().target()))
    gemm_on_tensor_cores(rt, c, a, b, m, n, k, stream);
  else
    gemm(rt, c, a, b, m, n, k, gemm_tiles_for(m, n, k), stream);
}

namespace reference {

template <Element T>
std::vector<double> gemm(std::span<const T> a, std::span<const T> b, int m, int n, int k) {
  std::vector<double> right(b.size()); // B in double once, not once per row of A
  std::transform(b.begin(), b.end(), right.begin(), [](T value) { return to_double(value); });
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int row = 0; row < m; ++row)
    for (int i = 0; i < k; ++i) {
      const double left = to_double(a[static_cast<std::size_t>(row) * k + i]);
      const double *b_row = right.data() + static_cast<std::size_t>(i) * n;
      double *c_row = c.data() + static_cast<std::size_t>(row) * n;
      for (int col = 0; col < n; ++col)
        c_row[col] += left * b_row[col];
    }
  return c;
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void gemm<T>(Runtime &, T *, const T *, const T *, int, int, int, const GemmTiles &,    \
                        Stream);                                                                   \
  template void gemm<T>(Runtime &, T *, const T *, const T *, int, int, int, Stream);              \
  template bool gemm_has_tensor_cores<T>(const jit::Target &);                                     \
  template detail::ChosenVariant detail::gemm_mma_variant<T>(int, int);                            \
  template detail::ChosenVariant detail::gemm_variant<T>(const GemmTiles &);                       \
  template std::vector<double> reference::gemm<T>(std::span<const T>, std::span<const T>, int,     \
                                                  int, int);
KJIT_INSTANTIATE(float)
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops

#include "kjit/ops/gemm.hpp"

#include "checks.hpp"
#include "kjit/templates/library.hpp"

#include <string>

namespace kjit::ops {

GemmTiles gemm_tiles_for(int m, int n, int /*k*/) {
  // 128 x 128 tiles reuse each staged element twice as often as 64 x 64 ones, but only pay when
  // there are enough of them to keep every multiprocessor busy (an H200 has 132, an MI250X GCD
  // 110): below about four per multiprocessor, the smaller tiles' extra blocks win.
  const long long large_tiles =
      static_cast<long long>(detail::divide_up(m, 128)) * detail::divide_up(n, 128);
  if (large_tiles >= 512)
    return {128, 128, 16, 8, 8};
  return {64, 64, 16, 4, 4};
}

template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, const GemmTiles &tiles,
          Stream stream) {
  constexpr std::string_view op = "gemm";
  detail::require(c != nullptr && a != nullptr && b != nullptr, op, "null pointer");
  detail::require(m > 0 && n > 0 && k > 0, op,
                  "m, n and k must be positive, not " + std::to_string(m) + ", " +
                      std::to_string(n) + ", " + std::to_string(k));
  detail::require(tiles.thread_m > 0 && tiles.thread_n > 0 && tiles.block_m % tiles.thread_m == 0 &&
                      tiles.block_n % tiles.thread_n == 0,
                  op, "thread tiles must divide the block tiles");
  const int threads = (tiles.block_m / tiles.thread_m) * (tiles.block_n / tiles.thread_n);
  detail::require(threads >= 32 && threads <= 1024, op,
                  "tiles give " + std::to_string(threads) +
                      " threads per block; (block_m / thread_m) * (block_n / thread_n) must be "
                      "in [32, 1024]");
  detail::require(tiles.block_k * (tiles.block_m + 4 + tiles.block_n) * 4 <= 48 * 1024, op,
                  "tiles need more than 48 KiB of shared memory");
  const int grid_rows = detail::divide_up(m, tiles.block_m);
  detail::require(grid_rows <= 65535, op,
                  "m = " + std::to_string(m) + " needs more than 65535 rows of blocks");
  static const Template &tmpl = templates::find("gemm");
  const Kernel &kernel = rt.kernel(tmpl, {{"T", element_name<T>()},
                                          {"BLOCK_M", tiles.block_m},
                                          {"BLOCK_N", tiles.block_n},
                                          {"BLOCK_K", tiles.block_k},
                                          {"THREAD_M", tiles.thread_m},
                                          {"THREAD_N", tiles.thread_n}});
  kernel.launch(Dim3(detail::divide_up(n, tiles.block_n), grid_rows), Dim3(threads), 0, stream, c,
                a, b, m, n, k);
}

template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, Stream stream) {
  gemm(rt, c, a, b, m, n, k, gemm_tiles_for(m, n, k), stream);
}

namespace reference {

template <Element T>
std::vector<double> gemm(std::span<const T> a, std::span<const T> b, int m, int n, int k) {
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int row = 0; row < m; ++row)
    for (int i = 0; i < k; ++i) {
      const double left = to_double(a[static_cast<std::size_t>(row) * k + i]);
      for (int col = 0; col < n; ++col)
        c[static_cast<std::size_t>(row) * n + col] +=
            left * to_double(b[static_cast<std::size_t>(i) * n + col]);
    }
  return c;
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void gemm<T>(Runtime &, T *, const T *, const T *, int, int, int, const GemmTiles &,    \
                        Stream);                                                                   \
  template void gemm<T>(Runtime &, T *, const T *, const T *, int, int, int, Stream);              \
  template std::vector<double> reference::gemm<T>(std::span<const T>, std::span<const T>, int,     \
                                                  int, int);
KJIT_INSTANTIATE(float)
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops

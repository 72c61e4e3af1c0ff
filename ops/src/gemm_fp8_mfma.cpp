#include "gemm_fp8_mfma.hpp"

#include "kjit/templates/library.hpp"
#include "launch.hpp"

#include <algorithm>
#include <cmath>

namespace kjit::ops {

namespace {

bool is_gfx942(const jit::Target &target) { return target.arch() == "gfx942"; }

} // namespace

bool detail::gemm_fp8_mfma_serves(const jit::Target &target) {
  return is_gfx942(target) || target.arch() == "gfx950";
}

detail::ChosenVariant detail::gemm_fp8_mfma_variant(int scaling, int m, int n) {
  // 128 x 128 tiles (4 waves of 64 x 64) where there are enough of them to fill an MI300X's 304
  // compute units about once, else 64 x 64.
  const long long large_tiles = static_cast<long long>(divide_up(m, 128)) * divide_up(n, 128);
  const int block = large_tiles >= 256 ? 128 : 64;
  static const Template &tmpl = templates::find("gemm_fp8_mfma");
  return {&tmpl, {{"BLOCK_M", block}, {"BLOCK_N", block}, {"SCALING", scaling}}};
}

void detail::gemm_fp8_mfma(Runtime &rt, int scaling, BFloat16 *d, const std::uint8_t *a,
                           const float *scale_a, const std::uint8_t *b, const float *scale_b, int m,
                           int n, int k, Stream stream) {
  const ChosenVariant variant = gemm_fp8_mfma_variant(scaling, m, n);
  const int block = variant.integer("BLOCK_M");
  require(divide_up(m, block) <= 65535, "gemm_fp8",
          [&] { return "m = " + std::to_string(m) + " needs more than 65535 rows of blocks"; });
  rt.kernel(*variant.tmpl, variant.params)
      .launch(
          {.grid = Dim3(divide_up(n, block), divide_up(m, block)), .block = 256, .stream = stream},
          reinterpret_cast<void *>(d), scale_a, scale_b, a, b, m, n, k);
}

Fp8Encoding gemm_fp8_encoding(const jit::Target &target) {
  return is_gfx942(target) ? Fp8Encoding::e4m3fnuz : Fp8Encoding::e4m3fn;
}

double decode_e4m3fnuz(std::uint8_t bits) {
  if (bits == 0x80) // the encoding's one NaN, where e4m3fn has its negative zero
    return NAN;
  const int exponent = bits >> 3 & 0xf;
  const int mantissa = bits & 0x7;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -10) : std::ldexp(8 + mantissa, exponent - 11);
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}

std::uint8_t encode_e4m3fnuz(double x) {
  if (std::isnan(x))
    return 0x80;
  const double magnitude = std::min(std::fabs(x), 240.0);
  // As encode_e4m3 with the bias one larger: one unit in the last place is 2^-10 below 2^-7 (the
  // subnormals), 2^(e-3) in [2^e, 2^(e+1)); a carry into the next binade is absorbed by the
  // encoding, and 240 rounds to itself.
  const int exponent = magnitude < 0x1p-7 ? -7 : std::ilogb(magnitude);
  const double units = std::nearbyint(std::ldexp(magnitude, 3 - exponent));
  const auto encoded = exponent == -7 && units < 8 ? static_cast<unsigned>(units)
                                                   : static_cast<unsigned>((exponent + 8) << 3) +
                                                         static_cast<unsigned>(units) - 8;
  if (encoded == 0)
    return 0; // no negative zero: 0x80 is NaN
  return static_cast<std::uint8_t>((std::signbit(x) ? 0x80 : 0) | encoded);
}

} // namespace kjit::ops

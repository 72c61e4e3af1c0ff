#include "kjit/ops/quant.hpp"

#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "variants.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

namespace kjit::ops {

namespace {

// Checks the arguments, picks the variant of `template_name` and launches it: one block per row.
template <Element T>
void quantise_rows(Runtime &rt, std::string_view template_name, void *out, float *scales,
                   const T *input, int rows, int hidden, Stream stream) {
  const std::string_view op = template_name;
  detail::require_pointer(out, op, "out");
  detail::require_pointer(scales, op, "scales");
  detail::require_pointer(input, op, "input");
  detail::require(rows > 0, op,
                  [&] { return "rows must be positive, not " + std::to_string(rows); });
  detail::require(hidden >= 1 && hidden <= 65536, op,
                  [&] { return "hidden " + std::to_string(hidden) + " is outside [1, 65536]"; });
  const detail::ChosenVariant variant = detail::quant_variant(template_name, hidden, out, input);
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  kernel.launch({.grid = rows, .block = variant.integer("THREADS"), .stream = stream}, out, scales,
                input);
}

} // namespace

namespace detail {

template <Element T>
ChosenVariant quant_variant(std::string_view template_name, int hidden, const void *out,
                            const T *input) {
  // The widest packed access (at most 16 bytes of input) that divides the row and keeps the
  // input (VEC elements) and the one-byte outputs (VEC bytes) aligned.
  const int vec =
      std::min(vector_width(sizeof(T), hidden, {input}), vector_width(1, hidden, {out}));
  // Enough threads that each holds at most 8 packs of its row in registers (a power of two from
  // 64, a multiple of every warp size, up to 1024: block_max's limit).
  int threads = 64;
  while (threads < 1024 && threads * 8 < hidden / vec)
    threads *= 2;
  return {&templates::find(template_name),
          {{"T", element_name<T>()}, {"HIDDEN", hidden}, {"VEC", vec}, {"THREADS", threads}}};
}

} // namespace detail

template <Element T>
void dynamic_per_token_quant_int8(Runtime &rt, std::int8_t *out, float *scales, const T *input,
                                  int rows, int hidden, Stream stream) {
  quantise_rows(rt, "dynamic_per_token_quant_int8", out, scales, input, rows, hidden, stream);
}

template <Element T>
void dynamic_per_token_quant_fp8(Runtime &rt, std::uint8_t *out, float *scales, const T *input,
                                 int rows, int hidden, Stream stream) {
  require_fp8_e4m3(rt.default_device().target());
  quantise_rows(rt, "dynamic_per_token_quant_fp8", out, scales, input, rows, hidden, stream);
}

bool has_fp8_e4m3(const jit::Target &target) {
  return detail::nvidia_compute_capability(target) >= 89;
}

void require_fp8_e4m3(const jit::Target &target) {
  if (!has_fp8_e4m3(target))
    throw Error(Errc::unsupported_target,
                "kjit::ops::dynamic_per_token_quant_fp8: target " + target.id() +
                    " has no fp8 e4m3 (NVIDIA sm_89 and newer have it; hiprtc has no fp8 type)");
}

double decode_e4m3(std::uint8_t bits) {
  const int exponent = bits >> 3 & 0xf;
  const int mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7)
    return NAN;
  const double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}

std::uint8_t encode_e4m3(double x) {
  if (std::isnan(x))
    return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double magnitude = std::min(std::fabs(x), 448.0);
  // Scale so that one unit in the last place is 1 (2^-9 below 2^-6, the subnormals; 2^(e-3) in
  // [2^e, 2^(e+1))), round to nearest even; a carry into the next binade is absorbed by the
  // encoding, and 448 rounds to itself, so saturation needs nothing more.
  const int exponent = magnitude < 0x1p-6 ? -6 : std::ilogb(magnitude);
  const double units = std::nearbyint(std::ldexp(magnitude, 3 - exponent));
  const auto encoded = exponent == -6 && units < 8 ? static_cast<unsigned>(units)
                                                   : static_cast<unsigned>((exponent + 7) << 3) +
                                                         static_cast<unsigned>(units) - 8;
  return static_cast<std::uint8_t>(sign | encoded);
}

namespace reference {

namespace {

template <typename Q, Element T, typename Quantise>
Quantized<Q> quantise_rows(std::span<const T> input, int rows, int hidden, double qmax,
                           Quantise quantise) {
  Quantized<Q> out{std::vector<Q>(input.size()), std::vector<double>(rows)};
  for (int row = 0; row < rows; ++row) {
    const std::span<const T> x = input.subspan(static_cast<std::size_t>(row) * hidden, hidden);
    double absmax = 0;
    for (T value : x)
      absmax = std::max(absmax, std::fabs(to_double(value)));
    const double scale = absmax / qmax;
    out.scales[row] = scale;
    for (int i = 0; i < hidden; ++i)
      out.values[static_cast<std::size_t>(row) * hidden + i] =
          scale > 0 ? quantise(to_double(x[i]) / scale) : Q(0);
  }
  return out;
}

} // namespace

template <Element T>
Quantized<std::int8_t> dynamic_per_token_quant_int8(std::span<const T> input, int rows,
                                                    int hidden) {
  return quantise_rows<std::int8_t>(input, rows, hidden, 127.0, [](double q) {
    return static_cast<std::int8_t>(std::clamp(std::nearbyint(q), -128.0, 127.0));
  });
}

template <Element T>
Quantized<std::uint8_t> dynamic_per_token_quant_fp8(std::span<const T> input, int rows,
                                                    int hidden) {
  return quantise_rows<std::uint8_t>(input, rows, hidden, 448.0, encode_e4m3);
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void dynamic_per_token_quant_int8<T>(Runtime &, std::int8_t *, float *, const T *, int, \
                                                int, Stream);                                      \
  template void dynamic_per_token_quant_fp8<T>(Runtime &, std::uint8_t *, float *, const T *, int, \
                                               int, Stream);                                       \
  template detail::ChosenVariant detail::quant_variant<T>(std::string_view, int, const void *,     \
                                                          const T *);                              \
  template reference::Quantized<std::int8_t> reference::dynamic_per_token_quant_int8<T>(           \
      std::span<const T>, int, int);                                                               \
  template reference::Quantized<std::uint8_t> reference::dynamic_per_token_quant_fp8<T>(           \
      std::span<const T>, int, int);
KJIT_INSTANTIATE(float)
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops

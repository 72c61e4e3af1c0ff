#include "gemm_fp8_mfma.hpp"

#include "kjit/ops/quant.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>

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

detail::ChosenVariant detail::gemm_fp8_mfma_variant(const TuningLookup &lookup, int scaling, int m,
                                                    int n, int k) {
  return tuned_variant(lookup, gemm_fp8_mfma_variant(scaling, m, n), {{"SCALING", scaling}},
                       fp8_gemm_tuning_extents(m, n, k));
}

namespace {

// A variant compiled, with its tile: 2 x 2 waves of 64 lanes.
struct MfmaPlan {
  const Kernel *kernel;
  int block_m, block_n;
};

// This thread's plan for the shape: chosen (the tuning table's winner, else the heuristic's) and
// compiled on its first call. Kept per m's bucket, n, k and the heuristic's tile, which follows
// m itself: without a record every call launches what the heuristic picks for its m. A winner
// that does not build is logged and the heuristic used.
const MfmaPlan &mfma_plan(Runtime &rt, int scaling, int m, int n, int k) {
  using Key = std::tuple<std::uint64_t, int, std::int64_t, int, int, int>;
  thread_local std::map<Key, MfmaPlan> plans;
  const detail::ChosenVariant heuristic = detail::gemm_fp8_mfma_variant(scaling, m, n);
  const Key key{rt.id(), scaling, detail::rows_bucket(m), n, k, heuristic.integer("BLOCK_M")};
  if (auto found = plans.find(key); found != plans.end()) [[likely]]
    return found->second;
  return detail::built_or_heuristic(
      detail::gemm_fp8_mfma_variant(detail::tuning_lookup(rt), scaling, m, n, k), heuristic,
      detail::gemm_shape_text(m, n, k),
      [&](const detail::ChosenVariant &variant) -> const MfmaPlan & {
        const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
        return plans
            .emplace(key, MfmaPlan{&kernel, variant.integer("BLOCK_M"), variant.integer("BLOCK_N")})
            .first->second;
      });
}

} // namespace

void detail::gemm_fp8_mfma(Runtime &rt, int scaling, BFloat16 *d, const std::uint8_t *a,
                           const float *scale_a, const std::uint8_t *b, const float *scale_b, int m,
                           int n, int k, Stream stream) {
  const MfmaPlan &plan = mfma_plan(rt, scaling, m, n, k);
  require(divide_up(m, plan.block_m) <= 65535, "gemm_fp8",
          [&] { return "m = " + std::to_string(m) + " needs more than 65535 rows of blocks"; });
  plan.kernel->launch({.grid = Dim3(divide_up(n, plan.block_n), divide_up(m, plan.block_m)),
                       .block = 256,
                       .stream = stream},
                      reinterpret_cast<void *>(d), scale_a, scale_b, a, b, m, n, k);
}

Fp8Encoding gemm_fp8_encoding(const jit::Target &target) {
  return is_gfx942(target) ? Fp8Encoding::e4m3fnuz : Fp8Encoding::e4m3fn;
}

// A pattern's e4m3fnuz value is half its e4m3fn value, except 0x80 (e4m3fn's -0, e4m3fnuz's
// NaN) and 0x7f and 0xff (e4m3fn's NaNs, e4m3fnuz's +-240).
double decode_e4m3fnuz(std::uint8_t bits) {
  if (bits == 0x80)
    return NAN;
  if ((bits & 0x7f) == 0x7f)
    return (bits & 0x80) != 0 ? -240.0 : 240.0;
  return decode_e4m3(bits) / 2;
}

std::uint8_t encode_e4m3fnuz(double x) {
  if (std::isnan(x))
    return 0x80;
  // As decode_e4m3fnuz: above the tie between 224 and 240 (to even: 224), +-240; else e4m3fn's
  // rounding of twice the value (an exact scaling), whose -0 has no place here.
  if (std::fabs(x) > 232)
    return std::signbit(x) ? 0xff : 0x7f;
  const std::uint8_t bits = encode_e4m3(2 * x);
  return bits == 0x80 ? 0 : bits;
}

} // namespace kjit::ops

#pragma once
// FP8 GEMM on Hopper (sm_90a) and AMD's gfx942 and gfx950: D = (A x scale_a) @ (B x scale_b)^T
// with A e4m3 [m, k] and B e4m3 [n, k] row-major (B as nn.Linear holds its weight, and as
// torch._scaled_mm reads its second operand's transpose), D bfloat16 [m, n] row-major, float
// scales, float accumulation and one rounding to bfloat16. Device pointers; the e4m3 values are
// bytes in the encoding of the device's target, gemm_fp8_encoding(target): OCP e4m3fn on sm_90a
// and gfx950 (encode_e4m3 makes them; torch.float8_e4m3fn), e4m3fnuz on gfx942
// (encode_e4m3fnuz; torch.float8_e4m3fnuz, as MI300's matrix cores read fp8). The same bytes
// mean other values in the other encoding (e4m3fnuz's are half of e4m3fn's, 0x80 is its NaN):
// convert them before a call on the other kind of device.
//
//   kjit::ops::gemm_fp8_blockscale(rt, d, a, {scale_a, m, k / 128}, b,
//                                  {scale_b, (n + 127) / 128, k / 128}, m, n, k);
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

// A row-major float matrix of scales on the device, with the shape the caller gives it (checked
// against what the operator expects).
struct ScaleTensor {
  const float *data;
  std::int64_t rows, columns;
};

// DeepSeek-V3's block scales: scale_a [m, k / 128], one per 1 x 128 block of A's rows; scale_b
// [ceil(n / 128), k / 128], one per 128 x 128 block of B. Each 128 of K is summed apart on the
// tensor cores and added, scaled, to float accumulators (DeepGEMM's promotion).
//
// Throws Error(bad_argument) for a null pointer, a non-positive size, k not a multiple of 128
// (the scale block), n not a multiple of 8, scales of another shape, or a, b or d not 16-byte
// aligned; Error(unsupported_target) naming the device's target unless it is sm_90a, gfx942 or
// gfx950; what Runtime::kernel throws.
void gemm_fp8_blockscale(Runtime &rt, BFloat16 *d, const std::uint8_t *a, ScaleTensor scale_a,
                         const std::uint8_t *b, ScaleTensor scale_b, int m, int n, int k,
                         Stream stream = nullptr);

// torch._scaled_mm's two forms: per tensor (scale_a and scale_b both [1, 1]) or row-wise
// (scale_a [m, 1], scale_b [1, n]); the products of all of K add up on the tensor cores and the
// scales multiply the sums. Throws as gemm_fp8_blockscale, with k a multiple of 16 (rows of A and
// B 16-byte aligned) instead of 128, and scales of neither form.
void gemm_fp8_scaled(Runtime &rt, BFloat16 *d, const std::uint8_t *a, ScaleTensor scale_a,
                     const std::uint8_t *b, ScaleTensor scale_b, int m, int n, int k,
                     Stream stream = nullptr);

// The fp8 e4m3 encodings: e4m3fn (OCP: bias 7, 0x7f and 0xff NaN, largest finite 448, 0x80 is
// -0) and e4m3fnuz (bias 8, 0x80 the only NaN, no negative zero, largest finite 240).
enum class Fp8Encoding { e4m3fn, e4m3fnuz };
// The encoding gemm_fp8_scaled and gemm_fp8_blockscale read on `target`: e4m3fnuz on gfx942,
// e4m3fn elsewhere.
Fp8Encoding gemm_fp8_encoding(const jit::Target &target);
// e4m3fnuz, exactly; decode_e4m3 and encode_e4m3 (kjit/ops/quant.hpp) are e4m3fn's.
double decode_e4m3fnuz(std::uint8_t bits);
// Rounds to nearest even, saturating finite values beyond +-240 to +-240; NaN gives 0x80, and
// -0 and negative values that round to zero give 0x00.
std::uint8_t encode_e4m3fnuz(double x);

namespace reference {

// D in double precision from the e4m3 values (of `encoding`) decoded exactly, with the scales of
// either call: scale_a and scale_b as host copies of the device tensors, their shapes given as
// above (block scales when `block`, else per tensor or row-wise by their sizes).
std::vector<double> gemm_fp8(std::span<const std::uint8_t> a, std::span<const float> scale_a,
                             std::span<const std::uint8_t> b, std::span<const float> scale_b, int m,
                             int n, int k, bool block, Fp8Encoding encoding = Fp8Encoding::e4m3fn);

} // namespace reference

} // namespace kjit::ops

#pragma once
// Dynamic per-token quantisation, as vLLM's dynamic_per_token_scaled_fp8_quant and
// dynamic_scaled_int8_quant: each row of input [rows, hidden] (device pointers, contiguous) gets
// its own scale, scales[row] = max|x| / QMAX, and out[row] = round(x / scale) saturated to the
// output's range; a row of zeros gets scale 0 and zeros.
//
//   int8:        QMAX 127, round to nearest even, out int8 [rows, hidden];
//   fp8 e4m3fn:  QMAX 448, out [rows, hidden] as e4m3 bytes (decode_e4m3 reads them); NVIDIA
//                sm_89 and newer only.
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

// Throws Error(bad_argument) for non-positive rows, hidden outside [1, 65536] or a null pointer;
// what Runtime::kernel throws.
template <Element T>
void dynamic_per_token_quant_int8(Runtime &rt, std::int8_t *out, float *scales, const T *input,
                                  int rows, int hidden, Stream stream = nullptr);

// As above, and Error(unsupported_target) naming the device's target before anything is compiled
// where it has no fp8 e4m3 (every AMD target hiprtc supports, NVIDIA before sm_89).
template <Element T>
void dynamic_per_token_quant_fp8(Runtime &rt, std::uint8_t *out, float *scales, const T *input,
                                 int rows, int hidden, Stream stream = nullptr);

// Whether `target` has fp8 e4m3: NVIDIA sm_89 and newer.
bool has_fp8_e4m3(const jit::Target &target);
// Throws Error(unsupported_target) naming `target` unless it has fp8 e4m3.
void require_fp8_e4m3(const jit::Target &target);

// fp8 e4m3fn (the OCP "FN" variant: no infinities, 0x7f/0xff are NaN, largest finite 448).
double decode_e4m3(std::uint8_t bits);
// Rounds to nearest even, saturating finite values beyond +-448 to +-448; NaN gives 0x7f.
std::uint8_t encode_e4m3(double x);

namespace reference {

template <typename Q> struct Quantized {
  std::vector<Q> values;      // [rows, hidden]
  std::vector<double> scales; // [rows]
};

// In double precision: scale = max|x| / 127, values = round-to-nearest-even(x / scale) clamped.
template <Element T>
Quantized<std::int8_t> dynamic_per_token_quant_int8(std::span<const T> input, int rows, int hidden);
// scale = max|x| / 448, values = encode_e4m3(x / scale).
template <Element T>
Quantized<std::uint8_t> dynamic_per_token_quant_fp8(std::span<const T> input, int rows, int hidden);

} // namespace reference

} // namespace kjit::ops

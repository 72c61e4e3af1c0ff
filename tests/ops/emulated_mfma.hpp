// The MFMA builtins that gemm_mfma.hip calls, emulated on the CPU for
// tests/ops/kernel_emulation.hpp: each is a product over the 64 lanes of a wavefront, computed
// from the operand and result layouts that LLVM's AMDGPU builtins and AMD's matrix instruction
// calculator document (and gemm_mfma.hip's header restates):
// - A: lane l holds A(row l % 32, k = (l / 32) * K_LANE + e) for e < K_LANE;
// - B: lane l holds B(k = (l / 32) * K_LANE + e, column l % 32);
// - C: lane l's element r holds C(row 8 * (r / 4) + 4 * (l / 32) + r % 4, column l % 32).
// K_LANE is 4 for the gfx942 forms (32x32x8) and 8 for gfx950's (32x32x16).
//
// So an emulated run proves that the kernel's staging, fragment reads and result writes agree
// with those documented layouts, not that the hardware does what the documents say.
//
// Include inside the emulating file's anonymous namespace, after the prelude and before
// gemm_mfma.hip, with _Float16 and __bf16 defined as std::uint16_t: the operands travel as 16-bit
// patterns, which the host compiler need not know as floating-point types.

namespace mfma_emulation {

typedef float Accumulator __attribute__((vector_size(16 * sizeof(float))));

// Each thread's operands of the running MFMA, as 16-bit patterns, indexed by threadIdx.x.
inline std::vector<std::array<std::uint16_t, 8>> a_lanes, b_lanes;

// Sizes the operand exchange for blocks of `threads` (before the launch: the threads share it).
inline void prepare(unsigned threads) {
  a_lanes.assign(threads, {});
  b_lanes.assign(threads, {});
}

// C + A @ B for the wave of the calling thread; E reads the 16-bit patterns. Every thread of the
// block calls it together (the kernel's MFMAs are not under divergent control flow).
template <::kjit::ops::Element E, int K_LANE, typename Operand>
Accumulator wave_product(Operand a, Operand b, Accumulator c) {
  static_assert(sizeof(Operand) == K_LANE * sizeof(std::uint16_t));
  const unsigned self = threadIdx.x;
  std::memcpy(a_lanes[self].data(), &a, sizeof a);
  std::memcpy(b_lanes[self].data(), &b, sizeof b);
  __syncthreads();
  const unsigned lane = self % 64, wave = self - lane;
  const auto element = [](const std::array<std::uint16_t, 8> &lane_operand, int k) {
    return ::kjit::ops::to_double(E{lane_operand[k % K_LANE]});
  };
  for (unsigned r = 0; r < 16; ++r) {
    const unsigned row = 8 * (r / 4) + 4 * (lane / 32) + r % 4, col = lane % 32;
    double sum = 0;
    for (int k = 0; k < 2 * K_LANE; ++k)
      sum += element(a_lanes[wave + row + 32 * (k / K_LANE)], k) *
             element(b_lanes[wave + col + 32 * (k / K_LANE)], k);
    c[r] = static_cast<float>(c[r] + sum);
  }
  __syncthreads(); // every lane has read the operands before the next MFMA writes them
  return c;
}

typedef std::uint16_t Bits4 __attribute__((vector_size(4 * sizeof(std::uint16_t))));
typedef std::uint16_t Bits8 __attribute__((vector_size(8 * sizeof(std::uint16_t))));
typedef short Shorts4 __attribute__((vector_size(4 * sizeof(short))));

} // namespace mfma_emulation

// gfx942: v_mfma_f32_32x32x8_f16 and v_mfma_f32_32x32x8_bf16 (bf16 as shorts).
inline mfma_emulation::Accumulator
__builtin_amdgcn_mfma_f32_32x32x8f16(mfma_emulation::Bits4 a, mfma_emulation::Bits4 b,
                                     mfma_emulation::Accumulator c, int, int, int) {
  return mfma_emulation::wave_product<::kjit::ops::Half, 4>(a, b, c);
}
inline mfma_emulation::Accumulator
__builtin_amdgcn_mfma_f32_32x32x8bf16_1k(mfma_emulation::Shorts4 a, mfma_emulation::Shorts4 b,
                                         mfma_emulation::Accumulator c, int, int, int) {
  return mfma_emulation::wave_product<::kjit::ops::BFloat16, 4>(a, b, c);
}
// gfx950: v_mfma_f32_32x32x16_f16 and v_mfma_f32_32x32x16_bf16.
inline mfma_emulation::Accumulator
__builtin_amdgcn_mfma_f32_32x32x16_f16(mfma_emulation::Bits8 a, mfma_emulation::Bits8 b,
                                       mfma_emulation::Accumulator c, int, int, int) {
  return mfma_emulation::wave_product<::kjit::ops::Half, 8>(a, b, c);
}
inline mfma_emulation::Accumulator
__builtin_amdgcn_mfma_f32_32x32x16_bf16(mfma_emulation::Bits8 a, mfma_emulation::Bits8 b,
                                        mfma_emulation::Accumulator c, int, int, int) {
  return mfma_emulation::wave_product<::kjit::ops::BFloat16, 8>(a, b, c);
}

// The fp8 form of both targets, v_mfma_f32_32x32x16_fp8_fp8 (gemm_fp8_mfma.hip): 8 bytes of A
// and of B a lane, in the layouts above with K_LANE = 8; the bytes are e4m3fnuz on gfx942 and
// OCP e4m3fn on gfx950 (the including file defines the target's macro), decoded here from the
// formats' definitions (tests/ops/emulated_fp8_mfma_decode_test.cpp checks them value by value).
namespace mfma_fp8_emulation {

// sign, 4 exponent bits of bias `bias`, 3 mantissa bits; subnormal where the exponent is 0.
inline double e4m3_value(std::uint8_t bits, int bias) {
  const int exponent = (bits >> 3) & 0xf, mantissa = bits & 0x7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa / 8.0, 1 - bias)
                                         : std::ldexp(1 + mantissa / 8.0, exponent - bias);
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}
// e4m3fnuz: bias 8; 0x80 (the pattern of negative zero) is the only NaN.
inline double decode_e4m3fnuz(std::uint8_t bits) {
  return bits == 0x80 ? std::nan("") : e4m3_value(bits, 8);
}
// OCP e4m3fn: bias 7; all-ones exponent and mantissa (0x7f, 0xff) are NaN; 0x80 is -0.
inline double decode_e4m3fn(std::uint8_t bits) {
  return (bits & 0x7f) == 0x7f ? std::nan("") : e4m3_value(bits, 7);
}
inline double decode_target_e4m3(std::uint8_t bits) {
#if defined(__gfx950__)
  return decode_e4m3fn(bits);
#else
  return decode_e4m3fnuz(bits);
#endif
}

} // namespace mfma_fp8_emulation

inline mfma_emulation::Accumulator
__builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(long a, long b, mfma_emulation::Accumulator c, int, int,
                                           int) {
  using namespace mfma_emulation;
  const unsigned self = threadIdx.x;
  std::memcpy(a_lanes[self].data(), &a, sizeof a);
  std::memcpy(b_lanes[self].data(), &b, sizeof b);
  __syncthreads();
  // The wave's A [32 x 16] and B [16 x 32] as the layouts place them: lane l holds A(l % 32,
  // (l / 32) * 8 + e) and B((l / 32) * 8 + e, l % 32) in its byte e.
  const unsigned lane = self % 64, wave = self - lane;
  double a_wave[32][16], b_wave[16][32];
  for (unsigned l = 0; l < 64; ++l) {
    std::uint8_t a_bytes[8], b_bytes[8];
    std::memcpy(a_bytes, a_lanes[wave + l].data(), sizeof a_bytes);
    std::memcpy(b_bytes, b_lanes[wave + l].data(), sizeof b_bytes);
    for (unsigned e = 0; e < 8; ++e) {
      a_wave[l % 32][(l / 32) * 8 + e] = mfma_fp8_emulation::decode_target_e4m3(a_bytes[e]);
      b_wave[(l / 32) * 8 + e][l % 32] = mfma_fp8_emulation::decode_target_e4m3(b_bytes[e]);
    }
  }
  for (unsigned r = 0; r < 16; ++r) {
    double sum = 0;
    for (unsigned k = 0; k < 16; ++k)
      sum += a_wave[8 * (r / 4) + 4 * (lane / 32) + r % 4][k] * b_wave[k][lane % 32];
    c[r] = static_cast<float>(c[r] + sum);
  }
  __syncthreads(); // every lane has read the operands before the next MFMA writes them
  return c;
}

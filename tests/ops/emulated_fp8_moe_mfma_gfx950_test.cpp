// gemm_fp8_mfma.hip and moe_mfma.hip on the CPU as compiled for gfx950: see
// tests/ops/emulated_fp8_moe_mfma.hpp.
#include "tests/ops/kernel_emulation.hpp"

#include "kjit/ops/gemm_fp8.hpp"
#include "kjit/ops/moe.hpp"
#include "ops/src/gemm_fp8_mfma.hpp"
#include "ops/src/moe_mfma.hpp"
#include "tests/ops/gpu_support.hpp"

#include <array>
#include <gtest/gtest.h>
#include <random>

#define KJIT_WARP_SIZE 64
#define __gfx950__ 1
#define _Float16 std::uint16_t
#define __bf16 std::uint16_t
#define EMULATED_SUITE EmulatedFp8MoeMfmaGfx950
namespace {
// The prelude and the emulated builtins come before the kernels, the tests after them.
// clang-format off
#include "templates/prelude/kjit/prelude.h"
#include "tests/ops/emulated_buffer.hpp"
#include "tests/ops/emulated_mfma.hpp"
#include "templates/kernels/gemm_mfma.hip"
#include "templates/kernels/moe_mfma.hip"
#include "templates/kernels/gemm_fp8_mfma.hip"
#include "tests/ops/emulated_fp8_moe_mfma.hpp"
// clang-format on
} // namespace

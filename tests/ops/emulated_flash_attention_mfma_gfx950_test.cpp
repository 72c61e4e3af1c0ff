// flash_attention_mfma.hip on the CPU as compiled for gfx950: see
// tests/ops/emulated_flash_attention_mfma.hpp.
#include "tests/ops/kernel_emulation.hpp"

#include "kjit/ops/flash_attention.hpp"
#include "ops/src/flash_attention_mfma.hpp"
#include "tests/ops/gpu_support.hpp"
#include "tests/ops/paged_prefill_case.hpp"

#include <algorithm>
#include <array>
#include <gtest/gtest.h>
#include <random>

#define KJIT_WARP_SIZE 64
#define __gfx950__ 1
#define _Float16 std::uint16_t
#define __bf16 std::uint16_t
#define EMULATED_SUITE EmulatedFlashAttentionMfmaGfx950
namespace {
// The prelude and the emulated builtins come before the kernel, the tests after it.
// clang-format off
#include "templates/prelude/kjit/prelude.h"
#include "tests/ops/emulated_buffer.hpp"
#include "tests/ops/emulated_mfma.hpp"
#include "templates/kernels/flash_attention_mfma.hip"
#include "tests/ops/emulated_flash_attention_mfma.hpp"
// clang-format on
} // namespace

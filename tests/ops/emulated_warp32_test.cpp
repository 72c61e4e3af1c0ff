// The row-wise and activation kernels run on the CPU with a warp of 32 lanes (NVIDIA, RDNA): see
// tests/ops/emulated_kernels.hpp.
#include "tests/ops/kernel_emulation.hpp"

#include "ops/src/launch.hpp"
#include "tests/ops/gpu_support.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>

#define KJIT_WARP_SIZE 32
#define EMULATED_SUITE EmulatedKernelsWarp32
namespace {
// The prelude comes before the kernels, the tests after them.
// clang-format off
#include "templates/prelude/kjit/prelude.h"
#include "templates/kernels/activation.hip"
#include "templates/kernels/rowwise.hip"
#include "tests/ops/emulated_kernels.hpp"
// clang-format on
} // namespace

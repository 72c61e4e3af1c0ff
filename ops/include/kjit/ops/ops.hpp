#pragma once
// kjit's operators: one C++ call per operator that picks the template variant for its shapes
// and types, compiles or loads it through a Runtime, and launches it on the Runtime's device.
#include "kjit/ops/activation.hpp"
#include "kjit/ops/element.hpp"
#include "kjit/ops/flash_attention.hpp"
#include "kjit/ops/gemm.hpp"
#include "kjit/ops/gemm_fp8.hpp"
#include "kjit/ops/moe.hpp"
#include "kjit/ops/norm.hpp"
#include "kjit/ops/paged_attention.hpp"
#include "kjit/ops/quant.hpp"
#include "kjit/ops/rotary.hpp"
#include "kjit/ops/softmax.hpp"

#pragma once
// The umbrella header: everything a user of kjit needs.
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/library.hpp"
#include "kjit/templates/template.hpp"

namespace kjit {
using jit::Target;
} // namespace kjit

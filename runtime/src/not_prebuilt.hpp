#pragma once
// The error of a prebuilt-mode Runtime asked for a variant no tier holds.
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"
#include "kjit/templates/template.hpp"

#include <filesystem>

namespace kjit {

// Error(not_prebuilt) naming the variant and the prebuild command that adds it into
// `prebuilt_dir` (empty: "DIR"): its built-in level when one has it, else a set file listing it.
Error not_prebuilt(const Instance &instance, const jit::Target &target,
                   const std::filesystem::path &prebuilt_dir);

} // namespace kjit

#pragma once
#include <string_view>

namespace kjit {

// The GPU vendor a target, a compiler or a device belongs to.
enum class Vendor { amd, nvidia };

constexpr std::string_view to_string(Vendor v) { return v == Vendor::amd ? "amd" : "nvidia"; }

} // namespace kjit

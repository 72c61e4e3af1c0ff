#pragma once
// What ships with kjit: the prelude every kernel is compiled with, and the built-in templates.
#include "kjit/templates/template.hpp"

#include <string_view>
#include <vector>

namespace kjit::templates {

// The header "kjit/prelude.h" (docs/ARCHITECTURE.md, "Templates and the prelude"), included before
// every template source.
const HeaderFile &prelude();

// The templates compiled into the library, in name order.
const std::vector<Template> &builtin();

// The built-in template called `name`; throws Error(unknown_template) listing the known ones.
const Template &find(std::string_view name);

} // namespace kjit::templates

#pragma once
// From a template's declared kernel argument types to the signature launches are checked
// against (sizes as the host ABI lays them out, which is what the drivers copy).
#include "kjit/runtime/kernel.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/templates/template.hpp"

namespace kjit {

// Throws Error(bad_argument) when the template declares no arguments or one whose size kjit
// cannot know (a struct): such templates are launched with an explicit KernelSignature
// (Runtime::kernel(tmpl, params, signature)).
KernelSignature signature_of(const Instance &instance);

// Throws Error(bad_argument) in one line unless the kernel of `code` takes arguments of the sizes
// `signature` names, as the code object records them (no device needed); also when it records
// none.
void check_signature(const CodeObject &code, const KernelSignature &signature);

} // namespace kjit

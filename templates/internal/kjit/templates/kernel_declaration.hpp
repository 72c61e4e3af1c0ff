#pragma once
// The kernel a template names, as its source declares it: read when a compile fails, so that a
// schema that does not fit the kernel, or a kernel name the source lacks, is said in the author's
// terms instead of the compiler's text about the name expression it was given.
#include "kjit/templates/template.hpp"

#include <string>

namespace kjit::templates {

// Why the template's kernel cannot be instantiated with its schema's parameters, in one line
// ("the kernel template axpby takes 2 parameters (T, N), the schema declares 3 (T, N, X)",
// "the source declares no kernel named axpy"), read from its source and headers; "" when a
// declaration of the kernel fits the schema, or none can be read (a kernel declared through a
// macro), so that the compiler's own log stands.
std::string kernel_mismatch(const Template &tmpl);

} // namespace kjit::templates

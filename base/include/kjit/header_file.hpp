#pragma once
// A header a kernel source #includes: a template declares its own, and the compiler is handed
// them (with the prelude) to resolve includes by name. Its content is part of every key.
#include <string>

namespace kjit {

struct HeaderFile {
  std::string name; // as the source #includes it: "kjit/prelude.h"
  std::string content;
  bool operator==(const HeaderFile &) const = default;
};

} // namespace kjit

#pragma once
// Text helpers every layer shares.
#include <functional>
#include <string>
#include <string_view>

namespace kjit {

// "a, b, c": each of `items`, as `project` makes it text (a std::string, a string_view or a C
// string), with `separator` between them; "" for none.
template <typename Range, typename Projection = std::identity>
std::string join(const Range &items, std::string_view separator = ", ", Projection project = {}) {
  std::string out;
  bool first = true;
  for (const auto &item : items) {
    if (!first)
      out += separator;
    first = false;
    out += std::invoke(project, item);
  }
  return out;
}

} // namespace kjit

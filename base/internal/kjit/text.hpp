#pragma once
// Text helpers every layer shares.
#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

// The words of `text`, separated by spaces and tabs: "a  b\tc" -> {"a", "b", "c"}; none for a
// blank text.
inline std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t start = text.find_first_not_of(" \t"); start != std::string_view::npos;
       start = text.find_first_not_of(" \t", start)) {
    const std::size_t end = std::min(text.find_first_of(" \t", start), text.size());
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

} // namespace kjit

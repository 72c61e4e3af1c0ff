#include "template_args.hpp"

#include "kjit/error.hpp"
#include "kjit/text.hpp"

#include <sstream>

namespace kjit::cli {

ParamValues parse_params(const std::vector<std::string> &items) {
  ParamValues params;
  for (const auto &item : items) {
    const auto equals = item.find('=');
    if (equals == std::string::npos || equals == 0)
      throw Error(Errc::bad_usage, "-p " + item + ": expected NAME=VALUE");
    std::string name = item.substr(0, equals);
    std::string text = item.substr(equals + 1);
    // A value that reads as a whole integer is an integer; anything else names a type.
    std::int64_t integer = 0;
    std::istringstream in(text);
    if (in >> integer && in.peek() == std::char_traits<char>::eof())
      params.add(std::move(name), integer);
    else
      params.add(std::move(name), std::move(text));
  }
  return params;
}

const Template &template_from_set(const templates::VariantSet &set, const std::string &name) {
  for (const Template *tmpl : set.templates())
    if (tmpl->name() == name)
      return *tmpl;
  try {
    return templates::find(name);
  } catch (const Error &error) {
    throw Error(error.code(), error.summary() + "; " + set.origin() +
                                  "'s templates: " + join(set.templates(), ", ", &Template::name));
  }
}

} // namespace kjit::cli

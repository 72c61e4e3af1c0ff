#include "kjit/templates/library.hpp"

#include "kjit/error.hpp"

#include <algorithm>
#include <string>

namespace kjit::templates {

namespace embedded {
extern const std::string_view prelude_h;
extern const std::string_view scale_hip;
extern const std::string_view axpy_hip;
} // namespace embedded

namespace {

std::vector<Template> make_builtin() {
  // Local, not a namespace-scope global: builtin() may run during another translation unit's
  // static initialisation (a `const Template &t = find(...)` at namespace scope), before such a
  // global would be constructed.
  const std::vector<std::string> element_types = {"float", "half", "bfloat16"};
  std::vector<Template> all;
  all.emplace_back("axpy", std::string(embedded::axpy_hip),
                   std::vector<ParamDecl>{{"T", Param::type(element_types, "float")},
                                          {"ITEMS", Param::one_of({1, 2, 4, 8}, 4)}},
                   TemplateOptions{.arguments = {"const T*", "T*", "float", "int"}});
  all.emplace_back("scale", std::string(embedded::scale_hip),
                   std::vector<ParamDecl>{{"T", Param::type(element_types, "float")},
                                          {"N", Param::integer(1, 1 << 30)}},
                   TemplateOptions{.arguments = {"T*", "float"}});
  return all;
}

} // namespace

const TemplateHeader &prelude() {
  static const TemplateHeader header{"kjit/prelude.h", std::string(embedded::prelude_h)};
  return header;
}

const std::vector<Template> &builtin() {
  static const std::vector<Template> all = make_builtin();
  return all;
}

const Template &find(std::string_view name) {
  const auto &all = builtin();
  auto found =
      std::find_if(all.begin(), all.end(), [&](const Template &t) { return t.name() == name; });
  if (found != all.end())
    return *found;
  std::string known;
  for (const auto &t : all)
    known += (known.empty() ? "" : ", ") + t.name();
  throw Error(Errc::unknown_template,
              "unknown template '" + std::string(name) + "'; known templates: " + known);
}

} // namespace kjit::templates

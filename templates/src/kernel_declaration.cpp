#include "kjit/templates/kernel_declaration.hpp"

#include "kjit/templates/includes.hpp"

#include <cctype>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace kjit::templates {
namespace {

bool identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

// Where the word `word` occurs in `text`, not as part of a longer identifier.
std::vector<std::size_t> word_positions(std::string_view text, std::string_view word) {
  std::vector<std::size_t> found;
  for (std::size_t at = text.find(word); at != std::string_view::npos;
       at = text.find(word, at + 1)) {
    const std::size_t end = at + word.size();
    if ((at == 0 || !identifier_char(text[at - 1])) &&
        (end == text.size() || !identifier_char(text[end])))
      found.push_back(at);
  }
  return found;
}

struct TemplateParameter {
  std::string text;  // as declared: "typename T", "int N = 4"
  bool type = false; // typename or class; else a value
  bool defaulted = false;
  bool pack = false;
};

// The parameters of the `template <...>` that `head` starts with; nullopt when it starts with no
// template or one this reader does not follow (a template template parameter).
std::optional<std::vector<TemplateParameter>> template_parameters(std::string_view head) {
  head = trimmed(head);
  if (!head.starts_with("template"))
    return std::vector<TemplateParameter>{}; // not a template: no parameters
  head = trimmed(head.substr(8));
  if (head.empty() || head.front() != '<')
    return std::nullopt;
  std::vector<TemplateParameter> parameters;
  int angles = 0, parens = 0;
  std::size_t start = 1;
  for (std::size_t i = 0; i < head.size(); ++i) {
    const char c = head[i];
    parens += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (parens > 0)
      continue;
    if (c == '<')
      ++angles;
    const bool closes = c == '>' && --angles == 0;
    if (!closes && !(c == ',' && angles == 1))
      continue;
    const std::string_view text = trimmed(head.substr(start, i - start));
    start = i + 1;
    if (!text.empty()) {
      if (text.starts_with("template"))
        return std::nullopt;
      const bool type = text.starts_with("typename") || text.starts_with("class");
      parameters.push_back({std::string(text), type, text.find('=') != std::string_view::npos,
                            text.find("...") != std::string_view::npos});
    }
    if (closes)
      return parameters;
  }
  return std::nullopt;
}

std::string listed(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

std::string count_of(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " parameter" : " parameters");
}

// Why a kernel declared with `parameters` cannot take the schema's, or "".
std::string misfit(const Template &tmpl, const std::vector<TemplateParameter> &parameters) {
  const std::vector<ParamDecl> &schema = tmpl.params();
  std::vector<std::string> declared, schema_names;
  std::size_t required = 0;
  bool pack = false;
  for (const TemplateParameter &parameter : parameters) {
    declared.push_back(parameter.text);
    required += !parameter.defaulted && !parameter.pack;
    pack = pack || parameter.pack;
  }
  for (const ParamDecl &param : schema)
    schema_names.push_back(param.name);
  const std::size_t given = schema.size();
  if (given < required || (!pack && given > parameters.size())) {
    const std::string takes = required == parameters.size() ? count_of(required)
                              : pack
                                  ? "at least " + count_of(required)
                                  : std::to_string(required) + " to " + count_of(parameters.size());
    return "the kernel template " + tmpl.kernel() + " takes " + takes + " (" + listed(declared) +
           "), the schema declares " + std::to_string(given) + " (" + listed(schema_names) + ")";
  }
  for (std::size_t i = 0; i < given && i < parameters.size() && !parameters[i].pack; ++i) {
    const bool schema_type = schema[i].param.kind() == ParamSchema::Kind::type;
    if (parameters[i].type != schema_type)
      return "the kernel template " + tmpl.kernel() + "'s parameter " + std::to_string(i + 1) +
             " (" + parameters[i].text + ") is " + (parameters[i].type ? "a type" : "a value") +
             ", the schema's " + schema[i].name + " " + (schema_type ? "a type" : "an integer");
  }
  return "";
}

// `text` without comments and preprocessor directives (an #include line before a kernel is no
// part of its declaration).
std::string declarations(std::string_view text) {
  std::string code;
  const std::string lines = without_comments(text);
  for (std::size_t at = 0; at < lines.size();) {
    const std::size_t end = lines.find('\n', at);
    const std::string_view line = std::string_view(lines).substr(at, end - at);
    if (!trimmed(line).starts_with("#"))
      code += line;
    code += '\n';
    at = end + 1;
  }
  return code;
}

} // namespace

std::string kernel_mismatch(const Template &tmpl) {
  std::string code = declarations(tmpl.source());
  for (const HeaderFile &header : tmpl.headers())
    code += declarations(header.content);
  const std::vector<std::size_t> uses = word_positions(code, tmpl.kernel());
  if (uses.empty())
    return "the source declares no kernel named " + tmpl.kernel() +
           " (the template's kernel; TemplateOptions::kernel, a set's \"kernel\")";
  std::string first_misfit;
  bool declared = false;
  for (std::size_t use : uses) {
    const std::size_t after = code.find_first_not_of(" \t\n", use + tmpl.kernel().size());
    if (after == std::string::npos || code[after] != '(')
      continue; // a use, not the declarator
    // The declaration runs from the end of the previous statement or block.
    const std::size_t previous = code.find_last_of(";{}", use);
    const std::string_view head =
        std::string_view(code).substr(previous == std::string::npos ? 0 : previous + 1,
                                      use - (previous == std::string::npos ? 0 : previous + 1));
    if (word_positions(head, "__global__").empty())
      continue;
    const std::optional<std::vector<TemplateParameter>> parameters = template_parameters(head);
    if (!parameters)
      return ""; // a declaration this reader does not follow: the compiler's log stands
    declared = true;
    std::string why = misfit(tmpl, *parameters);
    if (why.empty())
      return "";
    if (first_misfit.empty())
      first_misfit = std::move(why);
  }
  return declared ? first_misfit : "";
}

} // namespace kjit::templates

#include "kjit/templates/includes.hpp"

#include "kjit/error.hpp"

#include <array>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace kjit::templates {
namespace {

struct LogicalLine {
  std::size_t number; // of its first physical line, from 1
  std::string text;   // continuations joined, comments replaced by a space
};

// The source as the preprocessor sees it before directives: "\\\n" joins lines, and comments
// (which may span lines) become one space. String and character literals are kept whole, so a
// "/*" inside one starts no comment.
std::vector<LogicalLine> logical_lines(std::string_view text) {
  std::vector<LogicalLine> lines{{1, {}}};
  std::size_t physical = 1;
  bool in_block_comment = false;
  char in_literal = 0; // '"' or '\'' while inside one
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '\\' && next == '\n') { // a continuation, inside a comment or literal too
      ++i;
      ++physical;
      continue;
    }
    if (c == '\n') {
      ++physical;
      in_literal = 0; // an unterminated literal ends with its line
      if (!in_block_comment)
        lines.push_back({physical, {}});
      continue;
    }
    std::string &line = lines.back().text;
    if (in_block_comment) {
      if (c == '*' && next == '/') {
        in_block_comment = false;
        ++i;
        line += ' ';
      }
      continue;
    }
    if (in_literal != 0) {
      line += c;
      if (c == '\\' && next != '\0') // an escaped quote or backslash
        line += text[++i];
      else if (c == in_literal)
        in_literal = 0;
      continue;
    }
    if (c == '/' && next == '*') {
      in_block_comment = true;
      ++i;
      continue;
    }
    if (c == '/' && next == '/') { // to the end of the logical line: a continuation extends it
      while (i + 1 < text.size() && text[i + 1] != '\n') {
        const bool continued = text[i + 1] == '\\' && i + 2 < text.size() && text[i + 2] == '\n';
        i += continued ? 2 : 1; // on a continuation's '\n', the next line is looked at next
        physical += continued ? 1 : 0;
      }
      continue;
    }
    // '<' opens no literal: "a < b" is no header name. A quoted header name is a string literal.
    if (c == '"' ||
        (c == '\'' && !line.empty() &&
         !std::isalnum(static_cast<unsigned char>(line.back())))) // not a digit separator
      in_literal = c;
    line += c;
  }
  return lines;
}

std::string_view skip_spaces(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  return text;
}

// The problem with a header operand ("\"/x/h.h\"", "<h.h>", "HEADER"), or "".
std::string operand_problem(std::string_view directive, std::string_view operand) {
  operand = skip_spaces(operand);
  const std::string quoted = "#" + std::string(directive) + " " +
                             std::string(operand.substr(0, operand.find_first_of(" \t")));
  if (operand.empty())
    return "";
  if (operand.front() != '"' && operand.front() != '<')
    return quoted + " names its file through a macro, which kjit cannot check";
  if (operand.size() > 1 && operand[1] == '/')
    return quoted + " names an absolute path";
  return "";
}

// "__has_include(\"/x\")" anywhere in an #if or #elif line.
std::string has_include_problem(std::string_view line) {
  for (std::string_view name : {"__has_include_next", "__has_include"}) {
    for (std::size_t at = line.find(name); at != std::string_view::npos;
         at = line.find(name, at + 1)) {
      std::string_view rest = skip_spaces(line.substr(at + name.size()));
      if (rest.empty() || rest.front() != '(')
        continue;
      rest = skip_spaces(rest.substr(1));
      if (rest.size() > 1 && (rest.front() == '"' || rest.front() == '<') && rest[1] == '/')
        return std::string(name) + "(" + std::string(rest.substr(0, rest.find(')'))) +
               ") names an absolute path";
    }
  }
  return "";
}

constexpr std::array file_directives{std::string_view{"include_next"}, std::string_view{"include"},
                                     std::string_view{"import"}, std::string_view{"embed"}};

// The header name an operand starts with: "\"a/b.h\" x" -> {a/b.h, quoted}; nullopt when it
// starts with neither quote nor '<'.
std::optional<IncludeDirective> header_name(std::string_view operand) {
  operand = skip_spaces(operand);
  if (operand.empty() || (operand.front() != '"' && operand.front() != '<'))
    return std::nullopt;
  const char close = operand.front() == '"' ? '"' : '>';
  const std::size_t end = operand.find(close, 1);
  if (end == std::string_view::npos || end == 1)
    return std::nullopt;
  return IncludeDirective{std::string(operand.substr(1, end - 1)), close == '"', false};
}

// The directive a line starts with ("include" of "#  include <x>") and its operand, or nullopt.
std::optional<std::pair<std::string_view, std::string_view>> file_directive(std::string_view line) {
  std::string_view rest = skip_spaces(line);
  if (rest.empty() || rest.front() != '#')
    return std::nullopt;
  rest = skip_spaces(rest.substr(1));
  for (std::string_view directive : file_directives)
    if (rest.starts_with(directive)) {
      const std::string_view operand = rest.substr(directive.size());
      if (operand.empty() || operand.front() == ' ' || operand.front() == '\t' ||
          operand.front() == '"' || operand.front() == '<')
        return std::pair{directive, operand};
      return std::nullopt;
    }
  return std::nullopt;
}

} // namespace

std::vector<IncludeDirective> include_directives(std::string_view text) {
  std::vector<IncludeDirective> found;
  for (const LogicalLine &line : logical_lines(text)) {
    if (line.text.find('#') == std::string::npos)
      continue;
    if (auto directive = file_directive(line.text)) {
      const bool next = directive->first == "include_next";
      if (auto name = header_name(directive->second)) {
        name->next = next;
        found.push_back(std::move(*name));
      } else if (!skip_spaces(directive->second).empty()) {
        found.push_back({std::string(skip_spaces(directive->second)), false, true, next});
      }
      continue;
    }
    for (std::string_view has : {"__has_include_next", "__has_include"})
      for (std::size_t at = line.text.find(has); at != std::string::npos;
           at = line.text.find(has, at + has.size())) {
        const std::string_view rest =
            skip_spaces(std::string_view(line.text).substr(at + has.size()));
        if (!rest.empty() && rest.front() == '(')
          if (auto name = header_name(rest.substr(1))) {
            name->next = has == "__has_include_next";
            found.push_back(std::move(*name));
          }
      }
  }
  return found;
}

std::string checked_include_directory(std::string_view directory, std::string_view owner) {
  const std::string where = std::string(owner) + ": include directory " + std::string(directory);
  if (directory.empty())
    throw Error(Errc::file_io, std::string(owner) + ": an include directory is empty");
  std::error_code failed;
  const std::filesystem::path absolute =
      std::filesystem::absolute(std::filesystem::path(directory), failed).lexically_normal();
  if (failed)
    throw Error(Errc::file_io, where + ": " + failed.message());
  struct stat status {};
  if (::stat(absolute.c_str(), &status) != 0)
    throw Error(Errc::file_io,
                where + (errno == ENOENT ? std::string(" does not exist")
                                         : ": " + std::string(std::strerror(errno))));
  if (!S_ISDIR(status.st_mode))
    throw Error(Errc::file_io, where + " is not a directory");
  if (::access(absolute.c_str(), R_OK | X_OK) != 0)
    throw Error(Errc::file_io, where + " cannot be read: " + std::strerror(errno));
  std::string text = absolute.string();
  while (text.size() > 1 && text.back() == '/') // "a/b/." normalises to "a/b/"
    text.pop_back();
  return text;
}

std::string find_unkeyed_include(std::string_view text) {
  for (const LogicalLine &line : logical_lines(text)) {
    std::string_view rest = skip_spaces(line.text);
    if (rest.empty() || rest.front() != '#')
      continue;
    rest = skip_spaces(rest.substr(1));
    std::string problem;
    if (auto directive = file_directive(line.text))
      problem = operand_problem(directive->first, directive->second);
    else if (rest.starts_with("if") || rest.starts_with("elif"))
      problem = has_include_problem(rest);
    if (!problem.empty())
      return "line " + std::to_string(line.number) + ": " + problem;
  }
  return "";
}

std::string without_comments(std::string_view text) {
  std::string code;
  for (const LogicalLine &line : logical_lines(text))
    code.append(line.text).push_back('\n');
  return code;
}

} // namespace kjit::templates

#include "kjit/templates/includes.hpp"

#include <array>
#include <cctype>
#include <cstddef>
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

} // namespace

std::string find_unkeyed_include(std::string_view text) {
  for (const LogicalLine &line : logical_lines(text)) {
    std::string_view rest = skip_spaces(line.text);
    if (rest.empty() || rest.front() != '#')
      continue;
    rest = skip_spaces(rest.substr(1));
    std::string problem;
    for (std::string_view directive : file_directives)
      if (rest.starts_with(directive)) {
        const std::string_view operand = rest.substr(directive.size());
        if (operand.empty() || operand.front() == ' ' || operand.front() == '\t' ||
            operand.front() == '"' || operand.front() == '<')
          problem = operand_problem(directive, operand);
        break;
      }
    if (problem.empty() && (rest.starts_with("if") || rest.starts_with("elif")))
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

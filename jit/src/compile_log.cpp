#include "compile_log.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <utility>
#include <vector>

namespace kjit::jit {
namespace {

constexpr std::size_t context_lines = 2;
// A log with hundreds of errors (one bad header) stays readable; the log itself still has them.
constexpr std::size_t max_excerpts = 20;

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  return lines;
}

void append_excerpt(std::string &out, const SourceFile &file, std::size_t line) {
  std::vector<std::string_view> lines = split_lines(file.text);
  out.append("\n").append(file.name).append(":").append(std::to_string(line)).append(":\n");
  if (line == 0 || line > lines.size()) {
    out += "  (past the end of " + std::string(file.name) + ", which has " +
           std::to_string(lines.size()) +
           " lines: code the compiler appended itself, such as a name expression)\n";
    return;
  }
  std::size_t first = line > context_lines ? line - context_lines : 1;
  std::size_t last = std::min(lines.size(), line + context_lines);
  std::size_t width = std::to_string(last).size();
  for (std::size_t number = first; number <= last; ++number) {
    std::string label = std::to_string(number);
    out += (number == line ? "> " : "  ") + std::string(width - label.size(), ' ') + label + " | " +
           std::string(lines[number - 1]) + "\n";
  }
}

// `text` as a string literal for a #line directive.
std::string quoted(std::string_view text) {
  std::string literal = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      literal += '\\';
    literal += c;
  }
  return literal + '"';
}

} // namespace

std::string translation_unit(const CompileRequest &request) {
  std::string unit;
  if (!request.pre_includes.empty())
    unit += "#line 1 \"<kjit pre-includes>\"\n";
  for (const std::string &header : request.pre_includes)
    unit += "#include " + quoted(header) + "\n";
  unit += "#line 1 " + quoted(request.program_name) + "\n";
  return unit + request.source;
}

AnnotatedLog annotate_compile_log(std::string_view log, std::span<const SourceFile> files,
                                  const std::regex &error_location) {
  AnnotatedLog annotated{std::string(log), 0};
  std::string excerpts;
  std::set<std::pair<std::string, std::size_t>> shown;
  for (std::string_view line : split_lines(log)) {
    std::match_results<std::string_view::const_iterator> match;
    if (!std::regex_search(line.begin(), line.end(), match, error_location))
      continue;
    ++annotated.error_count;
    std::string name = match[1].str();
    auto file = std::find_if(files.begin(), files.end(),
                             [&](const SourceFile &candidate) { return candidate.name == name; });
    std::size_t number = 0;
    std::from_chars(match[2].first, match[2].second, number); // stays 0 if out of range
    if (file == files.end() || shown.size() == max_excerpts || !shown.emplace(name, number).second)
      continue;
    append_excerpt(excerpts, *file, number);
  }
  if (!excerpts.empty()) {
    if (!annotated.text.empty() && annotated.text.back() != '\n')
      annotated.text += '\n';
    annotated.text += "\nSource around each error:\n" + excerpts;
  }
  return annotated;
}

Error compile_failure(const CompileRequest &request, std::string_view log,
                      const std::regex &error_location, std::string_view compiler_status) {
  std::vector<SourceFile> files{{request.program_name, request.source}};
  for (const HeaderFile &header : request.headers)
    files.push_back({header.name, header.content});
  AnnotatedLog annotated = annotate_compile_log(log, files, error_location);
  std::string cause(compiler_status);
  if (annotated.error_count > 0)
    cause =
        std::to_string(annotated.error_count) + (annotated.error_count == 1 ? " error" : " errors");
  return Error(Errc::compile_error,
               request.program_name + ": compilation for " + request.target.id() + " failed (" +
                   cause + ")",
               std::move(annotated.text));
}

std::optional<Error> missing_device_library(std::string_view log, const Target &target,
                                            std::string_view release) {
  if (log.find("cannot find ROCm device library for " + target.arch()) == std::string_view::npos)
    return std::nullopt;
  const std::string isa = target.arch().substr(3); // "11-generic" from "gfx11-generic"
  return Error(Errc::unsupported_target,
               std::string(release) + " cannot compile for " + target.id() +
                   ": its compiler finds no device library for " + target.arch() +
                   " (oclc_isa_version_" + isa +
                   ".bc); give it a device-library folder that has it (HIP_DEVICE_LIB_PATH), or "
                   "build for another target",
               std::string(log));
}

} // namespace kjit::jit

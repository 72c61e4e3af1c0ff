#include "include_scan.hpp"

#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/templates/includes.hpp"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

namespace kjit {
namespace {

using Place = std::pair<std::uint32_t, std::string>; // include directory index, relative path

// A file to scan: a declared header (by name) or a header found on disk (at a place).
struct Pending {
  std::string text;
  std::optional<Place> place;
};

class Scanner {
public:
  Scanner(const jit::CompileRequest &request, std::string_view template_name, ScanLimits limits)
      : request_(request), template_name_(template_name), limits_(limits) {
    for (const HeaderFile &header : request.headers)
      declared_.emplace(header.name, &header.content);
  }

  std::vector<cache::RecordedHeader> run() {
    for (const std::string &name : request_.pre_includes)
      include_declared(name);
    queue_.push_back({request_.source, std::nullopt});
    while (!queue_.empty()) {
      Pending file = std::move(queue_.front());
      queue_.pop_front();
      for (const templates::IncludeDirective &directive : templates::include_directives(file.text))
        resolve(directive, file.place);
    }
    if (macro_includes_ > 0)
      log().debug("{}: {} #include lines name their header through a macro; the header manifest "
                  "cannot follow them",
                  template_name_, macro_includes_);
    std::vector<cache::RecordedHeader> headers;
    headers.reserve(recorded_.size());
    for (auto &[place, header] : recorded_)
      headers.push_back(std::move(header));
    return headers;
  }

private:
  void resolve(const templates::IncludeDirective &directive, const std::optional<Place> &from) {
    if (directive.macro) {
      ++macro_includes_;
      return;
    }
    if (directive.name.front() == '/') // refused in the template; a library's own is not keyed
      return;
    if (directive.quoted && from && !directive.next) {
      const std::filesystem::path beside =
          (std::filesystem::path(from->second).parent_path() / directive.name).lexically_normal();
      // Recorded, and the search goes on: clang (hiprtc) reads a file found beside its includer,
      // NVRTC does not (kjit passes --no-source-include), so both are recorded.
      if (std::optional<Place> place = relative_place(from->first, beside))
        look(*place);
    }
    if (!directive.next && include_declared(directive.name))
      return;
    const std::string name = std::filesystem::path(directive.name).lexically_normal().string();
    if (!cache::valid_header_path(name))
      return; // "../x.h" from the source itself: no include directory can hold it
    const std::uint32_t first = directive.next && from ? from->first + 1 : 0;
    for (std::uint32_t dir = first; dir < request_.include_dirs.size(); ++dir)
      if (look({dir, name}))
        return;
  }

  // `path` (relative to include directory `dir`, normalised) as a place in some include
  // directory: itself when it stays inside `dir`, else the directory that holds the file it names.
  std::optional<Place> relative_place(std::uint32_t dir, const std::filesystem::path &path) {
    if (cache::valid_header_path(path.string()))
      return Place{dir, path.string()};
    const std::filesystem::path absolute =
        (std::filesystem::path(request_.include_dirs[dir]) / path).lexically_normal();
    for (std::uint32_t other = 0; other < request_.include_dirs.size(); ++other) {
      const std::filesystem::path relative =
          absolute.lexically_relative(request_.include_dirs[other]);
      if (cache::valid_header_path(relative.string()))
        return Place{other, relative.string()};
    }
    std::error_code ignored;
    if (std::filesystem::exists(absolute, ignored))
      throw Error(Errc::bad_parameter,
                  std::string(template_name_) + ": a header of include directory " +
                      request_.include_dirs[dir] + " includes " + absolute.string() +
                      ", which lies outside every include directory: add the directory that "
                      "holds it");
    return std::nullopt; // under an #if that is false, or an error the compiler will report
  }

  // A declared header: scanned once. False when none has that name.
  bool include_declared(const std::string &name) {
    auto found = declared_.find(name);
    if (found == declared_.end())
      return false;
    if (declared_seen_.insert(name).second)
      queue_.push_back({*found->second, std::nullopt});
    return true;
  }

  // Whether `place` holds a header: recorded either way, scanned once when found.
  bool look(const Place &place) {
    if (auto known = recorded_.find(place); known != recorded_.end())
      return known->second.digest.has_value();
    if (recorded_.size() >= limits_.max_headers)
      throw Error(Errc::bad_parameter,
                  std::string(template_name_) + ": its includes name more than " +
                      std::to_string(limits_.max_headers) +
                      " headers to record (found or absent), the bound of a header manifest");
    std::string content;
    std::optional<cache::HeaderState> state =
        cache::read_header(request_.include_dirs[place.first] + '/' + place.second, &content);
    cache::RecordedHeader header{place.first, place.second, std::nullopt, {}};
    if (state) {
      bytes_ += content.size();
      if (bytes_ > limits_.max_bytes)
        throw Error(Errc::bad_parameter, std::string(template_name_) +
                                             ": the headers it includes hold more than " +
                                             std::to_string(limits_.max_bytes) +
                                             " bytes, the bound of a header manifest");
      header.digest = std::move(state->digest);
      header.stamp = state->stamp;
      queue_.push_back({std::move(content), place});
    }
    const bool found = header.digest.has_value();
    recorded_.emplace(place, std::move(header));
    return found;
  }

  const jit::CompileRequest &request_;
  std::string_view template_name_;
  ScanLimits limits_;
  std::unordered_map<std::string, const std::string *> declared_;
  std::set<std::string> declared_seen_;
  std::map<Place, cache::RecordedHeader> recorded_;
  std::deque<Pending> queue_;
  std::uint64_t bytes_ = 0;
  std::size_t macro_includes_ = 0;
};

} // namespace

std::vector<cache::RecordedHeader> scan_includes(const jit::CompileRequest &request,
                                                 std::string_view template_name,
                                                 ScanLimits limits) {
  return Scanner(request, template_name, limits).run();
}

} // namespace kjit

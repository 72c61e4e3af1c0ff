#include "dynamic_library.hpp"

#include "kjit/error.hpp"
#include "kjit/jit/elf.hpp"
#include "kjit/log.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <functional>
#include <link.h>
#include <optional>
#include <utility>

namespace kjit::jit {
namespace {

std::string last_dl_error() {
  const char *message = dlerror();
  return message != nullptr ? message : "unknown dlopen error";
}

std::string real_path_of(void *handle, const std::string &fallback) {
  link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr)
    return fallback;
  char resolved[PATH_MAX];
  return realpath(map->l_name, resolved) != nullptr ? resolved : map->l_name;
}

// {6, 4, 3} from "6.4.3"; nullopt for anything else ("6.4.3-rc", "6..4", "").
std::optional<std::vector<unsigned long>> dotted_version(std::string_view text) {
  std::vector<unsigned long> numbers;
  for (;;) {
    const std::size_t dot = text.find('.');
    const std::string_view part = text.substr(0, dot);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != part.npos)
      return std::nullopt;
    numbers.push_back(std::stoul(std::string(part)));
    if (dot == text.npos)
      return numbers;
    text.remove_prefix(dot + 1);
  }
}

} // namespace

DynamicLibrary DynamicLibrary::open_first(std::string_view what,
                                          std::span<const std::string> candidates,
                                          const char *required_symbol, Scope scope) {
  // RTLD_NODELETE: the vendor libraries start threads and register exit handlers; unmapping
  // them while those live crashes the process at exit, so a closed handle keeps them mapped.
  int flags = RTLD_NOW | RTLD_NODELETE | (scope == Scope::global ? RTLD_GLOBAL : RTLD_LOCAL);
  std::string attempts;
  for (const std::string &candidate : candidates) {
    void *handle = dlopen(candidate.c_str(), flags);
    if (handle == nullptr) {
      attempts += "  " + candidate + ": " + last_dl_error() + "\n";
      continue;
    }
    DynamicLibrary library(handle, real_path_of(handle, candidate));
    if (required_symbol != nullptr && dlsym(handle, required_symbol) == nullptr) {
      attempts += "  " + candidate + ": loaded " + library.real_path_ + " but it has no " +
                  required_symbol + "\n";
      continue;
    }
    log().debug("{}: loaded {}", what, library.real_path_);
    return library;
  }
  if (!attempts.empty())
    attempts.pop_back(); // the last newline
  throw Error(Errc::compiler_unavailable,
              std::string(what) + " could not be loaded; tried " +
                  std::to_string(candidates.size()) + " places:",
              attempts);
}

DynamicLibrary::DynamicLibrary(void *handle, std::string real_path)
    : handle_(handle), real_path_(std::move(real_path)) {}

DynamicLibrary::DynamicLibrary(DynamicLibrary &&other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), real_path_(std::move(other.real_path_)) {}

DynamicLibrary &DynamicLibrary::operator=(DynamicLibrary &&other) noexcept {
  std::swap(handle_, other.handle_);
  std::swap(real_path_, other.real_path_);
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr)
    dlclose(handle_);
}

std::vector<std::string> DynamicLibrary::needed() const {
  std::vector<std::string> names;
  link_map *map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_ld == nullptr)
    return names;
  // glibc relocates the loaded dynamic section's addresses (DT_STRTAB among them) on the targets
  // kjit builds for, so the string table's entry is an address in this process.
  const char *strings = nullptr;
  for (const ElfW(Dyn) *entry = map->l_ld; entry->d_tag != DT_NULL; ++entry)
    if (entry->d_tag == DT_STRTAB)
      strings = reinterpret_cast<const char *>(entry->d_un.d_ptr);
  if (strings == nullptr)
    return names;
  for (const ElfW(Dyn) *entry = map->l_ld; entry->d_tag != DT_NULL; ++entry)
    if (entry->d_tag == DT_NEEDED)
      names.emplace_back(strings + entry->d_un.d_val);
  return names;
}

void *DynamicLibrary::address(const char *name) const {
  dlerror(); // clear a stale message so that the one below belongs to this dlsym
  void *symbol = dlsym(handle_, name);
  if (symbol == nullptr)
    throw Error(Errc::compiler_unavailable,
                real_path_ + " does not export " + name + ": " + last_dl_error());
  return symbol;
}

std::vector<std::string> files_in(std::initializer_list<std::string_view> names,
                                  const std::vector<std::string> &directories) {
  std::vector<std::string> files;
  for (const std::string &directory : directories) {
    if (directory.empty())
      continue;
    for (std::string_view name : names)
      files.push_back(directory + "/" + std::string(name));
  }
  return files;
}

std::vector<std::string> library_candidates(std::initializer_list<std::string_view> names,
                                            const std::vector<std::string> &directories) {
  std::vector<std::string> candidates(names.begin(), names.end());
  for (std::string &file : files_in(names, directories))
    candidates.push_back(std::move(file));
  return candidates;
}

std::vector<std::string> versioned_directories(const std::string &parent, std::string_view prefix,
                                               std::string_view below) {
  std::vector<std::pair<std::vector<unsigned long>, std::string>> found;
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator(parent, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix))
      continue;
    if (std::optional<std::vector<unsigned long>> version =
            dotted_version(std::string_view(name).substr(prefix.size())))
      found.emplace_back(std::move(*version), parent + "/" + name + "/" + std::string(below));
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  std::vector<std::string> directories;
  for (auto &[version, directory] : found)
    directories.push_back(std::move(directory));
  return directories;
}

std::string directory_from_environment(const char *name, std::string_view suffix) {
  const char *value = std::getenv(name);
  if (value == nullptr || *value == '\0')
    return {};
  return std::string(value) + "/" + std::string(suffix);
}

std::string build_id_text(const DynamicLibrary &library) {
  const std::string file = std::filesystem::path(library.real_path()).filename().string();
  const std::optional<std::string> id = read_build_id_of_file(library.real_path());
  return id ? file + " build " + *id : file + " without build id";
}

} // namespace kjit::jit

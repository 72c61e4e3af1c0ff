#include "dynamic_library.hpp"

#include "kjit/error.hpp"
#include "kjit/jit/elf.hpp"
#include "kjit/log.hpp"

#include <climits>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
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

void *DynamicLibrary::address(const char *name) const {
  dlerror(); // clear a stale message so that the one below belongs to this dlsym
  void *symbol = dlsym(handle_, name);
  if (symbol == nullptr)
    throw Error(Errc::compiler_unavailable,
                real_path_ + " does not export " + name + ": " + last_dl_error());
  return symbol;
}

std::vector<std::string> library_candidates(std::initializer_list<std::string_view> names,
                                            std::initializer_list<std::string> directories) {
  std::vector<std::string> candidates(names.begin(), names.end());
  for (const std::string &directory : directories) {
    if (directory.empty())
      continue;
    for (std::string_view name : names)
      candidates.push_back(directory + "/" + std::string(name));
  }
  return candidates;
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

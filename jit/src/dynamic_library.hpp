#pragma once
// RAII around dlopen/dlsym for the vendor libraries, which kjit opens at run time and never links.
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::jit {

class DynamicLibrary {
public:
  // local keeps the library's symbols to itself; global lets libraries opened later resolve
  // against it (used to preload a library that another one dlopens by its soname).
  enum class Scope { local, global };

  // Opens the first of `candidates` (sonames or paths, as dlopen takes them) that loads and
  // exports `required_symbol` (any that loads when it is nullptr). Throws
  // Error(compiler_unavailable) "<what> could not be loaded" whose detail lists every candidate
  // with the reason it was passed over.
  static DynamicLibrary open_first(std::string_view what, std::span<const std::string> candidates,
                                   const char *required_symbol, Scope scope = Scope::local);

  DynamicLibrary(DynamicLibrary &&other) noexcept;
  DynamicLibrary &operator=(DynamicLibrary &&other) noexcept;
  ~DynamicLibrary();

  // The resolved file the library was loaded from, symbolic links followed
  // ("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153").
  const std::string &real_path() const { return real_path_; }

  // The address of `name`, cast to the function pointer type the caller declares. Throws
  // Error(compiler_unavailable) when the library does not export it.
  template <typename Function> Function function(const char *name) const {
    return reinterpret_cast<Function>(address(name));
  }
  // The libraries it names as its dependencies (its DT_NEEDED entries, "libLLVM.so.21.1"), read
  // from its dynamic section as loaded; empty when the loader does not say.
  std::vector<std::string> needed() const;

private:
  DynamicLibrary(void *handle, std::string real_path);
  void *address(const char *name) const;

  void *handle_ = nullptr;
  std::string real_path_;
};

// Each of `names` inside each of `directories` that is not empty (an empty entry stands for an
// environment variable that is not set), directory by directory.
std::vector<std::string> files_in(std::initializer_list<std::string_view> names,
                                  const std::vector<std::string> &directories);

// The places to look for a library: each of `names` as the dynamic loader finds it (its cache,
// LD_LIBRARY_PATH), then files_in(names, directories).
std::vector<std::string> library_candidates(std::initializer_list<std::string_view> names,
                                            const std::vector<std::string> &directories);

// "<parent>/<prefix><version>/<below>" for each directory in `parent` whose name is `prefix`
// followed by a version of dot-separated numbers ("rocm-6.4.3"), newest version first; none when
// `parent` cannot be read.
std::vector<std::string> versioned_directories(const std::string &parent, std::string_view prefix,
                                               std::string_view below);

// "libnvrtc.so.13 build 65be0db3...": the library's file name and GNU build id (see
// read_build_id), for compiler identities; "... without build id" when it has none.
std::string build_id_text(const DynamicLibrary &library);

// "$NAME/suffix" when the environment variable NAME is set and not empty, "" otherwise.
std::string directory_from_environment(const char *name, std::string_view suffix);

} // namespace kjit::jit

#pragma once
// Include directives the cache key cannot cover.
#include <string>
#include <string_view>
#include <vector>

namespace kjit::templates {

// The key hashes a kernel's source and its declared headers, found by name. A directive that
// reaches a file by absolute path (#include "/x/h.h", #include </x/h.h>, #include_next, #embed,
// __has_include("/x")) or through a macro (#include HEADER, whose expansion kjit cannot see)
// reads a file the key does not hash: a later change of that file would hand back the old code
// under the old key. Returns "" when `text` has none, else one line naming the first one and its
// line number ("line 3: #include \"/tmp/x/val.h\" names an absolute path"). Comments and line
// continuations are read as the preprocessor reads them.
std::string find_unkeyed_include(std::string_view text);

// `text` as the compiler reads it after line continuations and comments, one line per logical
// line: what kernel_mismatch (kernel_declaration.hpp) searches for the kernel's declaration.
std::string without_comments(std::string_view text);
// A header name an #include, #include_next, #import, #embed or __has_include of `text` names,
// whatever #if branch it is under: the include scanner's candidates (runtime/src/include_scan).
struct IncludeDirective {
  std::string name;    // as written between the quotes or angle brackets
  bool quoted = false; // "name": searched from the including file's directory first
  bool macro = false;  // #include HEADER: the name is a macro's, which no scanner can resolve
  bool next = false;   // #include_next, __has_include_next: searched after the includer's directory
};
std::vector<IncludeDirective> include_directives(std::string_view text);

// `directory` as an absolute, lexically normal path, once it is a directory this process can
// list and read. Throws Error(file_io) "<owner>: include directory D does not exist" (is not a
// directory, cannot be read: the reason).
std::string checked_include_directory(std::string_view directory, std::string_view owner);

} // namespace kjit::templates

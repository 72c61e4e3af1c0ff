#pragma once
// What every compiler shares around the vendor call: the translation unit it is given, and the
// detail of a compile_error: the log as the compiler wrote it, then, for each error it locates in
// a file kjit gave the compiler, the numbered source lines around it. Only the pattern of an
// error location differs from one compiler to the other.
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"

#include <cstddef>
#include <optional>
#include <regex>
#include <span>
#include <string>
#include <string_view>

namespace kjit::jit {

// The text the compiler compiles: an #include line per pre-include, then `#line 1
// "<program_name>"` and the source, so that the log names the source and counts its lines as its
// author does. The #include lines are named "<kjit pre-includes>", so that an error there is not
// pinned on the source's first lines.
std::string translation_unit(const CompileRequest &request);

// A file the compiler saw, under the name its log uses for it.
struct SourceFile {
  std::string_view name;
  std::string_view text;
};

struct AnnotatedLog {
  std::string text;            // the log, then one numbered excerpt per error location
  std::size_t error_count = 0; // log lines that report an error
};

// `error_location` is matched against each line of `log` with std::regex_search; a match is one
// error, its submatch 1 the file name as the log writes it and submatch 2 the 1-based line.
// Errors in files not among `files` (a system header) are counted but get no excerpt.
AnnotatedLog annotate_compile_log(std::string_view log, std::span<const SourceFile> files,
                                  const std::regex &error_location);

// The Error(compile_error) for a failed compile of `request`: "<program>: compilation for
// <target> failed (<n> errors)", its detail the annotated log. `compiler_status` (the vendor's
// name for its result) stands in for the count when the log locates no error.
Error compile_failure(const CompileRequest &request, std::string_view log,
                      const std::regex &error_location, std::string_view compiler_status);

// hiprtc's compiler (clang in comgr) fails a compile with "cannot find ROCm device library for
// <target>" when it has no device library (oclc_isa_version_<isa>.bc) for the target, whatever
// the source: Debian's ROCm 6.4 and 7.2 do so for every generic target with comgr's embedded copy
// (device_library.hpp), and any release with a device-library folder that lacks the target's
// file. That is the compiler's setup lacking the target, not an error in the source: an
// Error(unsupported_target) naming the target, the device library and `release`, the log as its
// detail. nullopt when `log` says no such thing.
std::optional<Error> missing_device_library(std::string_view log, const Target &target,
                                            std::string_view release);

} // namespace kjit::jit

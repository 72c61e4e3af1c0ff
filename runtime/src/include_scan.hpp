#pragma once
// The headers a compile could read from its include directories (docs/ARCHITECTURE.md, "Header
// libraries"): what a header manifest records on a miss.
#include "kjit/cache/header_manifest.hpp"
#include "kjit/jit/compiler.hpp"

#include <string_view>
#include <vector>

namespace kjit {

struct ScanLimits {
  std::size_t max_headers = cache::kMaxRecordedHeaders; // found or absent
  std::uint64_t max_bytes = cache::kMaxRecordedBytes;   // of the headers found
};

// Follows every #include, #include_next, #import, #embed and __has_include of the request's
// source, declared headers and the headers found, under any #if branch (conservative: a header
// the preprocessor skips is recorded too), resolving each name as the compilers search: a quoted
// name in the including file's directory (clang searches it first, NVRTC under
// --no-source-include not at all: it is recorded, and the search goes on), then the declared
// headers by name, then each include directory in order. A header found is recorded with its digest
// and stamp; each place searched before it, and every place for a name found nowhere (a compiler's
// own header, or one that does not exist yet), is recorded absent, so a header added there later is
// a miss. A name given through a macro (#include HEADER) cannot be followed; kjit logs how many at
// debug level. Returns the records sorted by directory and path. Throws Error(bad_parameter) naming
// `template_name` when the records exceed `limits`, or a quoted include reaches a file outside
// every include directory ("../x.h" from a directory's top); Error(file_io) for a header that is
// there but cannot be read.
std::vector<cache::RecordedHeader> scan_includes(const jit::CompileRequest &request,
                                                 std::string_view template_name,
                                                 ScanLimits limits = {});

} // namespace kjit

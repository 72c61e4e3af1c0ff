#pragma once
// One exception type for every failure kjit reports to its caller. The code says what kind of
// input was bad so that callers (and the CLI's exit status) can branch on it; the message is
// one clear line, optionally followed by a detail block (a compiler log, a candidate list).
#include <stdexcept>
#include <string>
#include <string_view>

namespace kjit {

enum class Errc {
  unknown_template,     // no template of that name
  bad_parameter,        // missing, unknown, wrong kind or out of range
  bad_target,           // the target id does not parse
  unsupported_target,   // the installed compiler cannot emit code for it
  bad_option,           // a compile option kjit refuses (it would make the cache key lie)
  compile_error,        // the compiler rejected the source; detail() holds the numbered log
  compiler_unavailable, // the vendor library could not be loaded
  cache_io,             // the cache could not be read or written
  not_prebuilt,         // KJIT_MODE=prebuilt and the variant is not in any tier
  bad_config,           // a KJIT_* variable that does not parse
  no_device,            // no GPU (or no driver) for a request that needs one
  device_error,         // the driver refused a call
  bad_argument,         // a kernel launch whose arguments do not match the kernel
  bad_archive,          // a cache archive that is truncated, altered or not kjit's
  bad_usage,            // a command line kjit cannot act on (an unknown command, a bad option)
  file_io,              // a file kjit was asked to read or write (a set, a --source) failed
  process_error,        // a helper process (prebuild worker, disassembler) is missing or failed
};

std::string_view to_string(Errc code);

class Error : public std::runtime_error {
public:
  Error(Errc code, std::string message, std::string detail = {});

  Errc code() const noexcept { return code_; }
  // The one-line summary, without the detail block.
  const std::string &summary() const noexcept { return summary_; }
  // Multi-line context (a compiler log with line numbers, candidates...). May be empty.
  const std::string &detail() const noexcept { return detail_; }

private:
  Errc code_;
  std::string summary_;
  std::string detail_;
};

} // namespace kjit

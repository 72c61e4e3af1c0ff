#include "exit_status.hpp"

// No default in the switch below, and -Wswitch an error here: a new Errc does not compile until it
// is given a status.
#pragma GCC diagnostic error "-Wswitch"

namespace kjit::cli {

ExitStatus exit_status_of(Errc code) {
  switch (code) {
  case Errc::unknown_template:
  case Errc::bad_parameter:
  case Errc::bad_target:
  case Errc::unsupported_target:
  case Errc::bad_option:
  case Errc::compile_error:
  case Errc::not_prebuilt:
  case Errc::bad_config:
  case Errc::bad_argument:
  case Errc::bad_archive:
  case Errc::bad_usage:
  case Errc::file_io:
    return exit_bad_input;
  case Errc::no_device:
    return exit_no_gpu;
  case Errc::cache_io:
    return exit_io_failure;
  case Errc::compiler_unavailable:
  case Errc::device_error:
  case Errc::process_error:
    return exit_internal;
  }
  return exit_internal;
}

} // namespace kjit::cli

#include "kjit/error.hpp"

namespace kjit {

std::string_view to_string(Errc code) {
  switch (code) {
  case Errc::unknown_template:
    return "unknown template";
  case Errc::bad_parameter:
    return "bad parameter";
  case Errc::bad_target:
    return "bad target";
  case Errc::unsupported_target:
    return "unsupported target";
  case Errc::bad_option:
    return "bad option";
  case Errc::compile_error:
    return "compile error";
  case Errc::compiler_unavailable:
    return "compiler unavailable";
  case Errc::cache_io:
    return "cache i/o";
  case Errc::not_prebuilt:
    return "not prebuilt";
  case Errc::bad_config:
    return "bad configuration";
  case Errc::no_device:
    return "no device";
  case Errc::device_error:
    return "device error";
  case Errc::bad_argument:
    return "bad argument";
  case Errc::bad_archive:
    return "bad archive";
  case Errc::bad_usage:
    return "bad usage";
  case Errc::file_io:
    return "file i/o";
  case Errc::process_error:
    return "process error";
  }
  return "error";
}

static std::string join_message(const std::string &message, const std::string &detail) {
  return detail.empty() ? message : message + "\n" + detail;
}

Error::Error(Errc code, std::string message, std::string detail)
    : std::runtime_error(join_message(message, detail)), code_(code), summary_(std::move(message)),
      detail_(std::move(detail)) {}

} // namespace kjit

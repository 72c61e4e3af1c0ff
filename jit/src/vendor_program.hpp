#pragma once
// One program of a vendor's runtime compiler. hiprtc copies NVRTC's API call for call, so one
// template drives both. `Functions` is the vendor's table of function pointers, with members named
// after the calls (create_program, compile_program, get_code...), each returning an int status
// where 0 is success, and get_error_string naming a status.
#include "compile_log.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::jit {

template <typename Functions> std::string status_name(const Functions &vendor, int status) {
  const char *name = vendor.get_error_string(status);
  return name != nullptr ? name : "status " + std::to_string(status);
}

// Throws Error(code, "<who>: <call> failed: <status name>") unless `status` is success.
template <typename Functions>
void check_status(const Functions &vendor, int status, std::string_view who, const char *call,
                  Errc code) {
  if (status != 0)
    throw Error(code, std::string(who) + ": " + call + " failed: " + status_name(vendor, status));
}

template <typename Functions> class VendorProgram {
public:
  // Creates the program from the request's translation unit and headers and registers its name
  // expressions.
  VendorProgram(const Functions &vendor, const CompileRequest &request)
      : vendor_(vendor), program_name_(request.program_name) {
    std::vector<const char *> header_texts, header_names;
    for (const HeaderFile &header : request.headers) {
      // hiprtc 5.2 refuses an empty header (HIPRTC_ERROR_INVALID_INPUT); a lone newline is the
      // same header to any preprocessor.
      header_texts.push_back(header.content.empty() ? "\n" : header.content.c_str());
      header_names.push_back(header.name.c_str());
    }
    std::string source = translation_unit(request);
    check(vendor_.create_program(&handle_, source.c_str(), program_name_.c_str(),
                                 int(header_texts.size()), header_texts.data(),
                                 header_names.data()),
          "create program");
    for (const std::string &expression : request.name_expressions)
      check(vendor_.add_name_expression(handle_, expression.c_str()), "add name expression");
  }
  VendorProgram(const VendorProgram &) = delete;
  VendorProgram &operator=(const VendorProgram &) = delete;
  ~VendorProgram() { vendor_.destroy_program(&handle_); }

  // Compiles with `options` and returns the vendor's status; log() has what the compiler said.
  int compile(const std::vector<std::string> &options) {
    std::vector<const char *> texts;
    for (const std::string &option : options)
      texts.push_back(option.c_str());
    int status = vendor_.compile_program(handle_, int(texts.size()), texts.data());
    std::size_t size = 0;
    check(vendor_.get_program_log_size(handle_, &size), "get program log size");
    std::string log(size, '\0'); // the size counts the terminating NUL
    if (size > 0)
      check(vendor_.get_program_log(handle_, log.data()), "get program log");
    log_ = log.substr(0, log.find('\0'));
    return status;
  }

  const std::string &log() const { return log_; }

  std::vector<std::byte> code() const {
    std::size_t size = 0;
    check(vendor_.get_code_size(handle_, &size), "get code size");
    std::vector<std::byte> code(size);
    check(vendor_.get_code(handle_, reinterpret_cast<char *>(code.data())), "get code");
    return code;
  }

  // The mangled name the compiler gave `expression`, or nullopt with `status` set.
  std::optional<std::string> lowered_name(const std::string &expression, int &status) const {
    const char *lowered = nullptr;
    status = vendor_.get_lowered_name(handle_, expression.c_str(), &lowered);
    if (status != 0 || lowered == nullptr || *lowered == '\0')
      return std::nullopt;
    return lowered;
  }

private:
  void check(int status, const char *call) const {
    check_status(vendor_, status, program_name_, call, Errc::compile_error);
  }

  const Functions &vendor_;
  std::string program_name_;
  typename Functions::Program handle_ = nullptr;
  std::string log_;
};

} // namespace kjit::jit

#pragma once
// A Compiler that runs no vendor library: lets key tests vary the compiler identity and
// environment, and runtime tests (Config::compilers) count compiles. Its "code object" is the
// request's name expressions and source, so different variants get different bytes; it compiles
// for `targets` (gfx90a with features sramecc and xnack, unless a test names others) and takes
// `compile_delay` per compile.
#include "kjit/jit/compiler.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

namespace kjit::testing {

class FakeCompiler : public jit::Compiler {
public:
  explicit FakeCompiler(std::string identity = "fake 1.0",
                        std::vector<std::pair<std::string, std::string>> environment = {})
      : identity_(std::move(identity)), environment_(std::move(environment)) {}
  Vendor vendor() const override { return Vendor::amd; }
  std::string_view name() const override { return "fake"; }
  const std::string &identity() const override { return identity_; }
  std::vector<std::pair<std::string, std::string>> environment() const override {
    return environment_;
  }
  const std::vector<jit::TargetSupport> &supported_targets() const override { return targets; }
  jit::CompileResult compile(const jit::CompileRequest &request) const override {
    ++compiles;
    std::this_thread::sleep_for(compile_delay);
    jit::CompileResult result;
    if (code_object_version)
      result.code = code_object_header(*code_object_version);
    std::string text = request.target.id();
    for (const std::string &expression : request.name_expressions) {
      text += expression;
      result.lowered_names.push_back("lowered " + expression);
    }
    text += request.source;
    for (char c : text)
      result.code.push_back(static_cast<std::byte>(c));
    return result;
  }
  std::vector<std::string> environment_variables() const override {
    std::vector<std::string> names;
    for (const auto &[name, value] : environment_)
      names.push_back(name);
    return names;
  }
  std::vector<std::string> library_files() const override { return library_files_; }
  std::vector<std::string> data_files() const override { return data_files_; }

  // An AMDGPU HSA code object's ELF header of `version` (and no sections), as hiprtc's code starts.
  static std::vector<std::byte> code_object_header(int version) {
    std::vector<std::byte> header(64);
    const unsigned char identity[] = {0x7f,
                                      'E',
                                      'L',
                                      'F',
                                      2,
                                      1,
                                      1,
                                      64 /* ELFOSABI_AMDGPU_HSA */,
                                      static_cast<unsigned char>(version - 2)};
    for (std::size_t i = 0; i < sizeof identity; ++i)
      header[i] = std::byte{identity[i]};
    header[18] = std::byte{0xE0}; // EM_AMDGPU
    return header;
  }

  std::vector<std::string> library_files_; // none by default: nothing to remember it by
  std::vector<std::string> data_files_;
  // When set, the code starts with code_object_header(*code_object_version), then the text.
  std::optional<int> code_object_version;
  std::chrono::milliseconds compile_delay{0};
  std::vector<jit::TargetSupport> targets{{"gfx90a", {"sramecc", "xnack"}}};
  mutable std::atomic<int> compiles = 0;

private:
  std::string identity_;
  std::vector<std::pair<std::string, std::string>> environment_;
};

} // namespace kjit::testing

#pragma once
// A Compiler that compiles nothing: lets key tests vary the compiler identity and environment.
#include "kjit/jit/compiler.hpp"

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
  const std::vector<jit::TargetSupport> &supported_targets() const override { return targets_; }
  jit::CompileResult compile(const jit::CompileRequest &) const override { return {}; }
  std::vector<std::string> environment_variables() const override {
    std::vector<std::string> names;
    for (const auto &[name, value] : environment_)
      names.push_back(name);
    return names;
  }
  std::vector<std::string> library_files() const override { return library_files_; }

  std::vector<std::string> library_files_; // none by default: nothing to remember it by

private:
  std::string identity_;
  std::vector<std::pair<std::string, std::string>> environment_;
  std::vector<jit::TargetSupport> targets_;
};

} // namespace kjit::testing

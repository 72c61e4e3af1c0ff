#pragma once
// The compiler interface: one implementation per vendor library (hiprtc inside libamdhip64,
// NVRTC in libnvrtc), each loaded at run time with dlopen so one build runs where either,
// both or neither is installed.
#include "kjit/header_file.hpp"
#include "kjit/jit/target.hpp"
#include "kjit/vendor.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kjit::jit {

struct CompileRequest {
  std::string program_name; // the file name the log shows: "scale.hip"
  std::string source;       // the template source, as its author wrote it
  // Headers #included before `source`, in order (the kjit prelude). The compiler prepends the
  // #include lines followed by `#line 1 "<program_name>"`, so that line numbers in the log
  // and in the numbered excerpt are those of `source` itself.
  std::vector<std::string> pre_includes;
  std::vector<HeaderFile> headers; // includable by name
  // Header library directories (absolute), searched in order after `headers`: -I to the compiler.
  // Their headers are keyed by the caller (a manifest: runtime/src/header_manifest), not here.
  std::vector<std::string> include_dirs;
  std::vector<std::string> name_expressions; // "scale<__half, 4096>": instantiated and lowered
  std::vector<std::string> options;          // canonical (see options.hpp), no target options
  Target target;
};

struct CompileResult {
  std::vector<std::byte> code;            // AMDGPU code object (ELF) or cubin
  std::vector<std::string> lowered_names; // one per name expression, same order
  std::string log;                        // warnings; empty when the compiler said nothing
};

// What the compiler can emit for one processor.
struct TargetSupport {
  std::string arch;                  // "gfx90a", "sm_90"
  std::vector<std::string> features; // feature names the processor accepts ("sramecc", "xnack")
};

class Compiler {
public:
  virtual ~Compiler() = default;

  virtual Vendor vendor() const = 0;
  virtual std::string_view name() const = 0; // "hiprtc", "nvrtc"
  // Version text identifying the code generator ("hiprtc 9.0 (HIP 5.2.21153, comgr 2.4)").
  // Part of every key: a compiler upgrade must not load code the old one made.
  virtual const std::string &identity() const = 0;
  // The release, short enough for people and tables ("nvrtc 13.0", "hiprtc, ROCm 5.2");
  // identity() is what keys use.
  virtual std::string release() const { return identity(); }
  // Environment variables this compiler reads that change the code it emits, with their values
  // now (unset ones omitted). Part of every key.
  virtual std::vector<std::pair<std::string, std::string>> environment() const = 0;
  // The names of those variables, set or not: what a later process reads to know environment()
  // without loading the compiler.
  virtual std::vector<std::string> environment_variables() const { return {}; }
  // The files the compiler was loaded from (symbolic links followed). identity() stays what it is
  // while none of them changes, so a later process can take it from a memo checked against these
  // files instead of loading the library (ccache's compiler_check=mtime). Empty: not memoisable.
  virtual std::vector<std::string> library_files() const { return {}; }
  // The other files and folders whose content identity() names, which the memo checks too:
  // hiprtc's device library (its folder and files, or the folder it would be found in).
  virtual std::vector<std::string> data_files() const { return {}; }
  // The processors this library can compile for, as the library itself reports them.
  virtual const std::vector<TargetSupport> &supported_targets() const = 0;

  // Throws Error(unsupported_target) naming the supported list, and the known releases that list
  // the target, when the compiler cannot emit code for `target` or one of its features. Called by
  // compile() before the vendor library sees the target: hiprtc 5.2 aborts the process on an
  // unknown one.
  void check_supported(const Target &target) const;

  // Throws Error(compile_error) whose detail() is the compiler log with source line numbers,
  // Error(unsupported_target), or Error(compiler_unavailable).
  virtual CompileResult compile(const CompileRequest &request) const = 0;
};

// Loads the compiler for `vendor` (hiprtc for amd, NVRTC for nvidia). Throws
// Error(compiler_unavailable) naming the libraries it looked for and why each failed.
std::unique_ptr<Compiler> load_compiler(Vendor vendor);

} // namespace kjit::jit

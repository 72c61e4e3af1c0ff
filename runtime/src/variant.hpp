#pragma once
// From a bound template instance and a target to what the compiler is given and the cache key
// that names its output (docs/ARCHITECTURE.md, "The key"). Every input that can change the code is
// in the key.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/header_manifest.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/templates/template.hpp"

namespace kjit {

// What a key needs to know of the compiler: its identity and the environment that changes its
// code. Known from the loaded compiler, or from a memo without loading it (compiler_memo.hpp).
struct CompilerIdentity {
  std::string identity;
  std::vector<std::pair<std::string, std::string>> environment;

  static CompilerIdentity of(const jit::Compiler &compiler) {
    return {compiler.identity(), compiler.environment()};
  }
  bool operator==(const CompilerIdentity &) const = default;
};

struct VariantDescription {
  jit::CompileRequest request;
  CompilerIdentity compiler; // as keyed
  cache::KeyBuilder key_inputs;
  // With include directories, the base key (everything but the headers), which names the header
  // manifest, until keyed_with_headers gives the entry's key.
  cache::Key key;
  bool has_include_dirs() const { return !request.include_dirs.empty(); }
};

// `runtime_include_dirs` (Config::include_dirs, absolute) are searched after the template's own.
// Throws Error(bad_option) when the template's compile options cannot be keyed.
VariantDescription describe_variant(const Instance &instance, const jit::Target &target,
                                    const CompilerIdentity &compiler,
                                    const std::vector<std::string> &runtime_include_dirs = {});

// `variant` (a base description) keyed by the headers a compile of it reads: a key input
// "include:<dir>:<path>" = digest, or "absent", for each.
VariantDescription keyed_with_headers(VariantDescription variant,
                                      const std::vector<cache::RecordedHeader> &headers);

// `variant` keyed by the headers its include directories hold now (scan_includes, under
// `template_name` in its errors): the key that a lookup through a header manifest and a compile
// now both arrive at, for Runtime::explain. `variant` itself when it has no include directories.
VariantDescription keyed_with_current_headers(VariantDescription variant,
                                              std::string_view template_name);

// `compiler.compile(request)`, where `request` instantiates `tmpl`'s kernel. A compile_error
// whose cause can be read from the source, a kernel declaration that does not fit the schema or a
// kernel name it lacks, is said in the template's terms in one line (the compiler's message and
// log as its detail): hiprtc and NVRTC speak of the name expression kjit gave them.
jit::CompileResult compile_variant(const jit::Compiler &compiler,
                                   const jit::CompileRequest &request, const Template &tmpl);

// The cache entry for `variant` compiled to `result` by `compiler` in `compile_ms`, stamped now.
cache::Entry make_entry(const Instance &instance, const VariantDescription &variant,
                        const jit::Compiler &compiler, jit::CompileResult result,
                        double compile_ms);

} // namespace kjit

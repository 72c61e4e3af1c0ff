#pragma once
// The Runtime: from a template and its parameters to a code object, through the tiers
// memory -> prebuilt -> user disk -> remote -> compile (docs/ARCHITECTURE.md, "The first call").
#include "kjit/cache/key.hpp"
#include "kjit/jit/target.hpp"
#include "kjit/runtime/config.hpp"
#include "kjit/runtime/device.hpp"
#include "kjit/runtime/explain.hpp"
#include "kjit/runtime/kernel.hpp"
#include "kjit/templates/template.hpp"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kjit {

// Where a Runtime found a code object the first time it was asked for it.
enum class Origin { compiled, user_cache, prebuilt, remote };
std::string_view to_string(Origin origin);

// A compiled variant: the code object and what is needed to load and launch its kernel.
class CodeObject {
public:
  const cache::Key &key() const { return key_; }
  const jit::Target &target() const { return target_; }
  std::span<const std::byte> code() const { return code_; }
  // The kernel's name expression ("scale<__half, 4096>") and lowered (mangled) name.
  const std::string &expression() const { return expression_; }
  const std::string &lowered_name() const { return lowered_name_; }
  Origin origin() const { return origin_; }
  // How long the compiler took when this variant was compiled (in this or an earlier process).
  double compile_ms() const { return compile_ms_; }
  // The user-tier or prebuilt file holding it (a remote hit is written to the user tier); empty
  // when it lives in memory only.
  const std::filesystem::path &entry_path() const { return entry_path_; }

private:
  friend class Runtime;
  CodeObject(cache::Key key, jit::Target target, std::vector<std::byte> code,
             std::string expression, std::string lowered_name, Origin origin, double compile_ms,
             std::filesystem::path entry_path);
  cache::Key key_;
  jit::Target target_;
  std::vector<std::byte> code_;
  std::string expression_;
  std::string lowered_name_;
  Origin origin_;
  double compile_ms_;
  std::filesystem::path entry_path_;
};

class Runtime {
public:
  explicit Runtime(Config config = Config::from_environment());
  ~Runtime();
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;

  const Config &config() const;
  // A number no other Runtime of this process has had or will have: lets callers memoise what
  // they found through a Runtime (kjit::ops's launch plans) without a stale pointer ever matching.
  std::uint64_t id() const;

  // What this Runtime did on its slow path (memory hits are not counted: that path stays free
  // of shared writes).
  struct Counters {
    std::uint64_t compiled = 0;
    std::uint64_t user_cache_hits = 0;
    std::uint64_t prebuilt_hits = 0;
    std::uint64_t remote_hits = 0;
  };
  Counters counters() const;

  // The variant of `tmpl` for `params` on `target`: from memory, the prebuilt tiers, the user
  // tier, the remote tiers, or compiled and stored. The reference stays valid for the Runtime's
  // life. Safe to call from many threads; concurrent requests for one missing variant compile once.
  //
  // Throws Error: bad_parameter, unsupported_target, bad_option, compile_error (with the log),
  // compiler_unavailable, not_prebuilt (KJIT_MODE=prebuilt). An unusable cache directory is not
  // an error: kjit warns once and keeps the variant in memory.
  const CodeObject &compile(const Template &tmpl, const ParamValues &params,
                            const jit::Target &target);

  // The variant compiled for `device` (default: the first GPU of KJIT_BACKEND), loaded onto it and
  // ready to launch, checked against the argument types the template declares
  // (TemplateOptions::arguments). Found again in memory on every later call; the reference stays
  // valid for the Runtime's life. Throws what compile() throws, and Error(no_device),
  // Error(device_error) when the driver refuses the code, Error(bad_argument) when the template
  // declares no arguments or one kjit cannot size (a struct): name those with a signature.
  const Kernel &kernel(const Template &tmpl, const ParamValues &params);
  const Kernel &kernel(const Template &tmpl, const ParamValues &params, const Device &device);
  // The same with the kernel's parameters named by their host types, in place of the ones the
  // template declares: `rt.kernel(tmpl, params, KernelSignature::of<Tile *, float2, int>())`.
  // A variant is loaded once per device with one signature: asking for it with another throws
  // Error(bad_argument) naming both.
  const Kernel &kernel(const Template &tmpl, const ParamValues &params,
                       const KernelSignature &signature);
  const Kernel &kernel(const Template &tmpl, const ParamValues &params,
                       const KernelSignature &signature, const Device &device);

  // Checks without a device that the variant compiled for `target` takes arguments of the sizes
  // `signature` names, as its code object records them: what kernel() and launches would check
  // on a GPU, so that a signature of structs can be tested on a build machine. Compiles or finds
  // the variant as compile() does. Throws what compile() throws, and Error(bad_argument) in one
  // line naming the kernel's argument sizes and the signature's when they differ.
  void check_signature(const Template &tmpl, const ParamValues &params, const jit::Target &target,
                       const KernelSignature &signature);
  // The same for the argument types the template declares (TemplateOptions::arguments).
  void check_signature(const Template &tmpl, const ParamValues &params, const jit::Target &target);

  // The device kernel(tmpl, params) launches on: the first GPU of KJIT_BACKEND, found once.
  // Throws Error(no_device) with the reason where there is none.
  const Device &default_device();

  // The compiler for `vendor`, loaded on first use. Throws Error(compiler_unavailable). For kjit's
  // own tools: jit::Compiler is declared in an internal header (kjit/jit/compiler.hpp).
  const jit::Compiler &compiler(Vendor vendor);

  // The identity of `vendor`'s compiler as this Runtime keys variants with it (in prebuilt mode,
  // the prebuilt tier's), without loading the compiler when it is known: what tuning records
  // are keyed by. Throws what compile() throws when none can be found.
  std::string compiler_identity(Vendor vendor);

  // Why compile(tmpl, params, target) would compile, or where it would find the variant, without
  // compiling, loading or counting anything: the key it would use and its inputs, what each tier
  // holds under it (memory, the prebuilt tiers, the user tier, the remotes), and the nearest
  // entries of the template for the target with the key inputs they differ in. Throws what
  // compile() throws before its lookup (bad_parameter, unsupported_target, bad_option), and
  // compiler_unavailable when no compiler identity is known (the key needs it), and cache_io when
  // a local tier's directory cannot be listed.
  Explanation explain(const Template &tmpl, const ParamValues &params, const jit::Target &target);

private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  std::uint64_t id_;
};

} // namespace kjit

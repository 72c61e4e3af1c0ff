#include "kjit/runtime/runtime.hpp"

#include "compiler_identities.hpp"
#include "include_scan.hpp"
#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/templates/includes.hpp"
#include "kjit/text.hpp"
#include "loaded_modules.hpp"
#include "memory_tier.hpp"
#include "nearest_entries.hpp"
#include "not_prebuilt.hpp"
#include "runtime_counters.hpp"
#include "signature.hpp"
#include "single_flight.hpp"
#include "tiered_store.hpp"
#include "variant.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <optional>

namespace kjit {

std::string_view to_string(Origin origin) {
  switch (origin) {
  case Origin::compiled:
    return "compiled";
  case Origin::user_cache:
    return "user cache";
  case Origin::prebuilt:
    return "prebuilt";
  case Origin::remote:
    return "remote";
  }
  return "?";
}

CodeObject::CodeObject(cache::Key key, jit::Target target, std::vector<std::byte> code,
                       std::string expression, std::string lowered_name, Origin origin,
                       double compile_ms, std::filesystem::path entry_path)
    : key_(key), target_(std::move(target)), code_(std::move(code)),
      expression_(std::move(expression)), lowered_name_(std::move(lowered_name)), origin_(origin),
      compile_ms_(compile_ms), entry_path_(std::move(entry_path)) {}

class Runtime::Impl {
public:
  explicit Impl(Config config)
      : config_(checked(std::move(config))), tiers_(config_), compilers_(config_.compilers),
        identities_(compilers_, config_.mode, tiers_.prebuilt(),
                    tiers_.user() ? tiers_.user()->layout().compilers_directory()
                                  : std::filesystem::path(),
                    tier_list(config_)) {}

  // Leaves what this Runtime did in the cache's statistics and keeps the user tier within
  // KJIT_CACHE_SIZE, once per Runtime rather than on any hot path. A prebuilt-mode Runtime writes
  // no entry and creates nothing: its hits go into an existing, writable user tier's statistics.
  ~Impl() {
    cache::CacheCounters counters = counters_.totals();
    counters += tiers_.remote_counters();
    if (config_.mode == Mode::prebuilt) {
      tiers_.count(counters);
      return;
    }
    tiers_.add_statistics(counters);
    if (counters.compiles > 0 && config_.cache_size_bytes != 0)
      tiers_.prune(config_.cache_size_bytes);
  }

  const Config &config() const { return config_; }
  Runtime::Counters counters() const { return counters_.summary(); }
  const jit::Compiler &compiler(Vendor vendor) { return compilers_.load(vendor); }

  // `newest_code_object`: the newest AMDGPU code object version the caller can load; a cached
  // entry newer than that is a miss. The memory tier keeps what each limit found apart, so that a
  // code object found for a target is never handed to a device that cannot load it.
  const CodeObject &compile(const Template &tmpl, const ParamValues &params,
                            const jit::Target &target, int newest_code_object) {
    const std::uint64_t scope =
        newest_code_object == any_code_object ? 0 : static_cast<std::uint64_t>(newest_code_object);
    const std::uint64_t hash = memory_hash(tmpl, params, target, scope);
    if (const CodeObject *hit = code_objects_.find(hash, tmpl, params, target, scope))
      return *hit;
    tmpl.check_target(target.vendor(), target.arch()); // before any compiler is loaded
    const CodeObject &object = resolve(tmpl.bind(params), target, newest_code_object);
    code_objects_.insert(hash, tmpl, params, target, &object, scope);
    return object;
  }

  // What the Runtime's configuration lets a lookup return, and with `device`, what it loads.
  int newest_code_object(const Device *device) const {
    int newest = config_.newest_code_object_version.value_or(any_code_object);
    if (device != nullptr)
      newest = std::min(newest, device->newest_code_object_version().value_or(any_code_object));
    return newest;
  }

  // `given`: the signature the caller names, or null for the one the template declares.
  const Kernel &kernel(const Template &tmpl, const ParamValues &params, const Device &device,
                       const KernelSignature *given) {
    // Two devices of one target share code objects but not loaded modules.
    const std::uint64_t scope =
        (static_cast<std::uint64_t>(device.backend()) << 32) | (device.ordinal() + 1u);
    const std::uint64_t hash = memory_hash(tmpl, params, device.target(), scope);
    if (const Kernel *hit = kernels_.find(hash, tmpl, params, device.target(), scope))
      return checked(*hit, given);

    const CodeObject &code = compile(tmpl, params, device.target(), newest_code_object(&device));
    const Kernel &kernel = modules_.kernel(code, device, scope, [&] {
      return given != nullptr ? *given : signature_of(tmpl.bind(params));
    });
    kernels_.insert(hash, tmpl, params, device.target(), &kernel, scope);
    return checked(kernel, given);
  }

  static const Kernel &checked(const Kernel &kernel, const KernelSignature *given) {
    // Sizes are what launches are checked by; the spelling of a type may differ.
    auto size = [](const KernelParameter &parameter) { return parameter.size; };
    if (given != nullptr && !std::ranges::equal(kernel.signature().parameters(),
                                                given->parameters(), {}, size, size)) [[unlikely]]
      throw Error(Errc::bad_argument, kernel.name() + " is loaded with the signature " +
                                          kernel.signature().to_string() + ", not " +
                                          given->to_string());
    return kernel;
  }

  const Device &default_device() {
    // Resolved once: devices() reads KJIT_BACKEND, which a launch path should not do each call.
    // A failure is not remembered, so a later call tries again.
    if (const Device *known = default_device_.load(std::memory_order_acquire))
      return *known;
    const Device &first = devices().front();
    default_device_.store(&first, std::memory_order_release);
    return first;
  }

  std::string keyed_compiler(Vendor vendor) { return identities_.of(vendor).identity; }

  Explanation explain(const Template &tmpl, const ParamValues &params, const jit::Target &target) {
    tmpl.check_target(target.vendor(), target.arch());
    const Instance instance = tmpl.bind(params);
    const VariantDescription base =
        describe_variant(instance, target, identities_.of(target.vendor()), config_.include_dirs);
    const VariantDescription variant = keyed_with_current_headers(base, tmpl.name());
    Explanation out;
    out.key = variant.key;
    out.template_name = tmpl.name();
    out.target = target.id();
    out.key_inputs = variant.key_inputs.fields();
    TierLookup &memory = out.tiers.emplace_back();
    memory.tier = "memory";
    memory.state = in_memory(base.key) ? TierLookup::State::holds : TierLookup::State::missing;
    memory.target = target.id();
    std::vector<TierLookup> stored =
        tiers_.lookups(variant.key, target.id(), [&] { return stand_ins(instance, variant); });
    out.tiers.insert(out.tiers.end(), stored.begin(), stored.end());
    out.nearest = nearest_entries(tiers_.local().lookup_order(), tmpl.name(), target.id(),
                                  out.key_inputs, Explanation::kNearest);
    return out;
  }

private:
  // `config` with its include directories checked and made absolute.
  static Config checked(Config config) {
    for (std::string &dir : config.include_dirs) {
      try {
        dir = templates::checked_include_directory(dir, "KJIT_INCLUDE_PATH (Config::include_dirs)");
      } catch (const Error &error) {
        throw Error(Errc::bad_config, error.summary());
      }
    }
    return config;
  }

  // "DIR1, DIR2": every prebuilt tier configured, in lookup order.
  static std::string tier_list(const Config &config) {
    return join(config.prebuilt_tiers(), ", ",
                [](const std::filesystem::path &dir) { return dir.string(); });
  }

  // A variant's key and the newest code object version its lookup accepted.
  using ObjectKey = std::pair<cache::Key, int>;

  // Whether this Runtime holds `key`'s code object, found under any code object version limit.
  bool in_memory(const cache::Key &key) const {
    return objects_.holds({key, std::numeric_limits<int>::min()},
                          [&key](const ObjectKey &held) { return held.first == key; });
  }

  // Why `variant` is compiled, for the debug line of each compile: KJIT_REBUILD, no entry of its
  // template and target in the local tiers, or what the nearest one's key inputs differ in.
  std::string why_compiling(const Instance &instance, const VariantDescription &variant) const {
    if (config_.rebuild)
      return "KJIT_REBUILD=1 ignores cached entries";
    try {
      Explanation near;
      near.template_name = instance.source_template().name();
      near.target = variant.request.target.id();
      near.nearest = nearest_entries(tiers_.local().lookup_order(), near.template_name, near.target,
                                     variant.key_inputs.fields(), 1);
      return near.reason();
    } catch (const std::exception &error) { // a tier's directory that cannot be listed
      return std::string("the local tiers cannot be listed: ") + error.what();
    }
  }

  // Threads asking for one variant share the first one's lookup or compile.
  const CodeObject &resolve(const Instance &instance, const jit::Target &target,
                            int newest_code_object) {
    VariantDescription variant =
        describe_variant(instance, target, identities_.of(target.vendor()), config_.include_dirs);
    return objects_.get({variant.key, newest_code_object},
                        [&] { return load_or_build(instance, variant, newest_code_object); });
  }

  // The one place a CodeObject is made: from a verified entry holding one kernel. Counts a hit
  // for any origin but a compile.
  std::unique_ptr<CodeObject> code_object(const VariantDescription &variant, Found found) {
    auto &entry = found.record;
    auto object = std::unique_ptr<CodeObject>(
        // With include directories, the entry's own key: variant.key is the base key, of no file.
        new CodeObject(variant.has_include_dirs() ? entry.header.key : variant.key,
                       variant.request.target, std::move(entry.code), entry.header.kernels[0].first,
                       entry.header.kernels[0].second, found.origin, entry.header.compile_ms,
                       std::move(found.path)));
    if (found.origin != Origin::compiled)
      counters_.hit(object->origin(), object->compile_ms());
    return object;
  }

  // The entries built for targets whose code also runs on the variant's (jit::serving_targets,
  // most specific first): prebuilds name targets as GPU_ARCHS does ("gfx90a", "gfx11-generic",
  // "sm_90"), while a device asks for its own ("gfx90a:sramecc+:xnack-", "gfx1101", "sm_90a").
  std::vector<TieredStore::StandIn> stand_ins(const Instance &instance,
                                              const VariantDescription &variant) const {
    std::vector<TieredStore::StandIn> found;
    for (const jit::Target &candidate : jit::serving_targets(variant.request.target))
      if (candidate != variant.request.target)
        found.push_back(
            {describe_variant(instance, candidate, variant.compiler, config_.include_dirs).key,
             candidate.id()});
    return found;
  }

  // The variant from the tiers, else compiled (once per machine and fleet) and published.
  std::unique_ptr<CodeObject> load_or_build(const Instance &instance,
                                            const VariantDescription &variant,
                                            int newest_code_object) {
    if (!config_.rebuild) {
      if (auto found = tiers_.find(
              variant.key, variant.request.target.id(),
              [&] { return stand_ins(instance, variant); }, newest_code_object,
              variant.request.include_dirs))
        return code_object(variant, std::move(*found));
    }
    const jit::Target &target = variant.request.target;
    if (config_.mode == Mode::prebuilt)
      throw not_prebuilt(instance, target, config_.prebuilt_dir);

    const jit::Compiler &jit_compiler = compiler(target.vendor());
    jit_compiler.check_supported(target);
    if (CompilerIdentity loaded = identities_.of(target.vendor()); loaded != variant.compiler) {
      // The memo named another compiler than the one the loader found (one installed elsewhere on
      // the search path since): key the variant by the real one.
      log().info("{} is not the compiler the memo named: keying by it", loaded.identity);
      return load_or_build(instance,
                           describe_variant(instance, target, loaded, config_.include_dirs),
                           newest_code_object);
    }

    // Concurrent processes, and nodes of a fleet, compile a variant once: whoever waited takes
    // what the holder published.
    TieredStore::Compiling compiling = tiers_.begin_compile(
        variant.key, target.id(), !config_.rebuild, variant.request.include_dirs);
    if (compiling.published)
      return code_object(variant, std::move(*compiling.published));
    return build(instance, variant, jit_compiler, compiling);
  }

  // Compiles the variant and publishes its entry under `compiling`.
  std::unique_ptr<CodeObject> build(const Instance &instance, const VariantDescription &variant,
                                    const jit::Compiler &jit_compiler,
                                    const TieredStore::Compiling &compiling) {
    // Read before the compile, so that what is recorded is at most as new as what it reads.
    std::vector<cache::RecordedHeader> headers;
    if (variant.has_include_dirs())
      headers = scan_includes(variant.request, instance.source_template().name());

    counters_.miss();
    if (log().should_log(spdlog::level::debug))
      log().debug("compiling {} ({}) for {}: {}", instance.source_template().name(),
                  instance.canonical_params(), variant.request.target.id(),
                  why_compiling(instance, variant));
    const auto started = std::chrono::steady_clock::now();
    const VariantDescription keyed =
        variant.has_include_dirs() ? keyed_with_headers(variant, headers) : variant;
    jit::CompileResult result =
        compile_variant(jit_compiler, keyed.request, instance.source_template());
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    counters_.compiled(compile_ms);

    cache::Entry entry = make_entry(instance, keyed, jit_compiler, std::move(result), compile_ms);
    std::filesystem::path entry_path =
        variant.has_include_dirs()
            ? tiers_.publish(compiling, entry, variant.key,
                             static_cast<std::uint32_t>(variant.request.include_dirs.size()),
                             std::move(headers))
            : tiers_.publish(compiling, entry);
    return code_object(variant, {std::move(entry), Origin::compiled, std::move(entry_path)});
  }

  Config config_;
  TieredStore tiers_;
  Compilers compilers_;
  CompilerIdentities identities_;
  RuntimeCounters counters_;

  MemoryTier<CodeObject> code_objects_;
  MemoryTier<Kernel> kernels_;
  SingleFlight<ObjectKey, CodeObject> objects_;
  LoadedModules modules_;
  std::atomic<const Device *> default_device_ = nullptr;
};

namespace {
std::atomic<std::uint64_t> runtimes_made = 0;
} // namespace

Runtime::Runtime(Config config)
    : impl_(std::make_unique<Impl>(std::move(config))), id_(++runtimes_made) {}
std::uint64_t Runtime::id() const { return id_; }
Runtime::~Runtime() = default;
const Config &Runtime::config() const { return impl_->config(); }
Runtime::Counters Runtime::counters() const { return impl_->counters(); }
const jit::Compiler &Runtime::compiler(Vendor vendor) { return impl_->compiler(vendor); }
const Device &Runtime::default_device() { return impl_->default_device(); }
std::string Runtime::compiler_identity(Vendor vendor) { return impl_->keyed_compiler(vendor); }
Explanation Runtime::explain(const Template &tmpl, const ParamValues &params,
                             const jit::Target &target) {
  return impl_->explain(tmpl, params, target);
}
const Kernel &Runtime::kernel(const Template &tmpl, const ParamValues &params) {
  return impl_->kernel(tmpl, params, impl_->default_device(), nullptr);
}
const Kernel &Runtime::kernel(const Template &tmpl, const ParamValues &params,
                              const Device &device) {
  return impl_->kernel(tmpl, params, device, nullptr);
}
const Kernel &Runtime::kernel(const Template &tmpl, const ParamValues &params,
                              const KernelSignature &signature) {
  return impl_->kernel(tmpl, params, impl_->default_device(), &signature);
}
const Kernel &Runtime::kernel(const Template &tmpl, const ParamValues &params,
                              const KernelSignature &signature, const Device &device) {
  return impl_->kernel(tmpl, params, device, &signature);
}
void Runtime::check_signature(const Template &tmpl, const ParamValues &params,
                              const jit::Target &target, const KernelSignature &signature) {
  kjit::check_signature(compile(tmpl, params, target), signature);
}

void Runtime::check_signature(const Template &tmpl, const ParamValues &params,
                              const jit::Target &target) {
  kjit::check_signature(compile(tmpl, params, target), signature_of(tmpl.bind(params)));
}

const CodeObject &Runtime::compile(const Template &tmpl, const ParamValues &params,
                                   const jit::Target &target) {
  return impl_->compile(tmpl, params, target, impl_->newest_code_object(nullptr));
}

} // namespace kjit

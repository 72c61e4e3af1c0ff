#include "kjit/runtime/runtime.hpp"

#include "compiler_memo.hpp"
#include "include_scan.hpp"
#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/templates/includes.hpp"
#include "kjit/templates/sets.hpp"
#include "kjit/text.hpp"
#include "memory_tier.hpp"
#include "nearest_entries.hpp"
#include "signature.hpp"
#include "tiered_store.hpp"
#include "variant.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <map>
#include <mutex>
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

namespace {

// One compiler per vendor for the whole process: loading one reads the target list and version
// from the vendor library, which a fresh Runtime should not pay for again. A failed load is
// retried on the next request.
class ProcessCompilers {
public:
  static const jit::Compiler &load(Vendor vendor) {
    std::lock_guard lock(mutex_);
    auto &slot = compilers_[static_cast<int>(vendor)];
    if (!slot)
      slot = jit::load_compiler(vendor);
    return *slot;
  }
  // The compiler when this process has loaded it already; nullptr otherwise.
  static const jit::Compiler *loaded(Vendor vendor) {
    std::lock_guard lock(mutex_);
    return compilers_[static_cast<int>(vendor)].get();
  }

private:
  static inline std::mutex mutex_;
  static inline std::unique_ptr<jit::Compiler> compilers_[2];
};

} // namespace

class Runtime::Impl {
public:
  explicit Impl(Config config) : config_(std::move(config)), tiers_(config_) {
    for (std::string &dir : config_.include_dirs) {
      try {
        dir = templates::checked_include_directory(dir, "KJIT_INCLUDE_PATH (Config::include_dirs)");
      } catch (const Error &error) {
        throw Error(Errc::bad_config, error.summary());
      }
    }
    if (const cache::DiskStore *user = tiers_.user())
      memo_.emplace(user->layout().compilers_directory());
  }

  // Leaves what this Runtime did in the cache's statistics and keeps the user tier within
  // KJIT_CACHE_SIZE, once per Runtime rather than on any hot path. A prebuilt-mode Runtime writes
  // no entry and creates nothing: its hits go into an existing, writable user tier's statistics.
  ~Impl() {
    counters_ += tiers_.remote_counters();
    if (config_.mode == Mode::jit)
      tiers_.close(counters_, counters_.compiles > 0 ? config_.cache_size_bytes : 0);
    else
      tiers_.count(counters_);
  }

  const Config &config() const { return config_; }
  Runtime::Counters counters() const {
    std::lock_guard lock(counters_mutex_);
    return {counters_.compiles, counters_.user_hits, counters_.prebuilt_hits,
            counters_.remote_hits};
  }

  const jit::Compiler &compiler(Vendor vendor) {
    return config_.compilers ? config_.compilers(vendor) : ProcessCompilers::load(vendor);
  }

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
    std::lock_guard lock(loaded_mutex_);
    auto &slot = loaded_[{code.key(), scope}];
    if (!slot) {
      Module module = Module::load(device, code.code());
      Kernel kernel = module.kernel(code.lowered_name(),
                                    given != nullptr ? *given : signature_of(tmpl.bind(params)),
                                    code.expression());
      slot = std::make_unique<Loaded>(Loaded{std::move(module), std::move(kernel)});
    }
    kernels_.insert(hash, tmpl, params, device.target(), &slot->kernel, scope);
    return checked(slot->kernel, given);
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

  std::string keyed_compiler(Vendor vendor) { return compiler_identity(vendor).identity; }

  Explanation explain(const Template &tmpl, const ParamValues &params, const jit::Target &target) {
    tmpl.check_target(target.vendor(), target.arch());
    const Instance instance = tmpl.bind(params);
    const VariantDescription variant = describe_variant(
        instance, target, compiler_identity(target.vendor()), config_.include_dirs);
    Explanation out;
    out.key = variant.key;
    out.template_name = tmpl.name();
    out.target = target.id();
    out.key_inputs = variant.key_inputs.fields();
    TierLookup &memory = out.tiers.emplace_back();
    memory.tier = "memory";
    memory.state = in_memory(variant.key) ? TierLookup::State::holds : TierLookup::State::missing;
    memory.target = target.id();
    std::vector<TierLookup> stored =
        tiers_.lookups(variant.key, target.id(), [&] { return stand_ins(instance, variant); });
    out.tiers.insert(out.tiers.end(), stored.begin(), stored.end());
    out.nearest = nearest_entries(tiers_.local().lookup_order(), tmpl.name(), target.id(),
                                  out.key_inputs, Explanation::kNearest);
    return out;
  }

private:
  // Whether this Runtime holds `key`'s code object, found under any code object version limit.
  bool in_memory(const cache::Key &key) {
    std::lock_guard lock(objects_mutex_);
    auto at = objects_.lower_bound({key, std::numeric_limits<int>::min()});
    return at != objects_.end() && at->first.first == key;
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

  // Single flight: the first thread to ask for a key resolves it, the others wait for its result
  // (or its exception).
  const CodeObject &resolve(const Instance &instance, const jit::Target &target,
                            int newest_code_object) {
    VariantDescription variant = describe_variant(
        instance, target, compiler_identity(target.vendor()), config_.include_dirs);
    const ObjectKey key{variant.key, newest_code_object};

    std::promise<const CodeObject *> promise;
    std::shared_future<const CodeObject *> pending;
    {
      std::lock_guard lock(objects_mutex_);
      if (auto found = objects_.find(key); found != objects_.end())
        return *found->second;
      if (auto running = in_flight_.find(key); running != in_flight_.end())
        pending = running->second;
      else
        in_flight_.emplace(key, promise.get_future().share());
    }
    if (pending.valid())
      return *pending.get();

    try {
      auto object = load_or_build(instance, variant, newest_code_object);
      std::lock_guard lock(objects_mutex_);
      const CodeObject &stored = *objects_.emplace(key, std::move(object)).first->second;
      in_flight_.erase(key);
      promise.set_value(&stored);
      return stored;
    } catch (...) {
      std::lock_guard lock(objects_mutex_);
      in_flight_.erase(key);
      promise.set_exception(std::current_exception());
      throw;
    }
  }

  // The one place a CodeObject is made: from a verified entry holding one kernel. Counts a hit
  // for any origin but a compile.
  std::unique_ptr<CodeObject> code_object(const VariantDescription &variant, Found found) {
    auto &entry = found.entry;
    auto object = std::unique_ptr<CodeObject>(
        // With include directories, the entry's own key: variant.key is the base key, of no file.
        new CodeObject(variant.has_include_dirs() ? entry.header.key : variant.key,
                       variant.request.target, std::move(entry.code), entry.header.kernels[0].first,
                       entry.header.kernels[0].second, found.origin, entry.header.compile_ms,
                       std::move(found.path)));
    if (found.origin != Origin::compiled)
      count_hit(*object);
    return object;
  }

  void count_hit(const CodeObject &object) {
    std::lock_guard lock(counters_mutex_);
    switch (object.origin()) {
    case Origin::prebuilt:
      ++counters_.prebuilt_hits;
      break;
    case Origin::remote:
      ++counters_.remote_hits;
      break;
    default:
      ++counters_.user_hits;
    }
    counters_.saved_ms += object.compile_ms();
  }

  // Names the variant and the prebuild command that adds it: its built-in level when one has it,
  // else a set file listing it.
  [[noreturn]] void not_prebuilt(const Instance &instance, const jit::Target &target) {
    const Template &tmpl = instance.source_template();
    std::string params;
    for (const auto &[name, value] : instance.values()) {
      // Appended piece by piece: GCC 12 warns wrongly (-Wrestrict) on the one-expression form.
      params += params.empty() ? "\"" : ", \"";
      params += name;
      params += "\": ";
      params += value.is_integer() ? value.to_string() : '"' + value.to_string() + '"';
    }
    const std::string destination =
        " --targets \"" + target.id() + "\" --out " +
        (config_.prebuilt_dir.empty() ? std::string("DIR") : config_.prebuilt_dir.string());
    const int level = templates::builtin_level_of(instance);
    const std::string command = level != 0
                                    ? "kjit prebuild --level " + std::to_string(level) + destination
                                    : "kjit prebuild --sets FILE" + destination +
                                          " with FILE's \"variants\" "
                                          "listing {\"template\": \"" +
                                          tmpl.name() + "\", \"params\": {" + params + "}}";
    throw Error(Errc::not_prebuilt,
                tmpl.name() + " (" + instance.canonical_params() + ") for " + target.id() +
                    " is in no prebuilt or cached tier and KJIT_MODE=prebuilt forbids compiling; "
                    "add it with: " +
                    command);
  }

  // What keys need of `vendor`'s compiler. In prebuilt mode: the identity the prebuilt tier was
  // built with, so that no compiler is needed (nor consulted: one installed since must not change
  // the keys of what was shipped). Otherwise the loaded compiler's once this process has loaded
  // it, else the memo's, so that a process whose variants are all cached never loads it; the memo
  // is written when the compiler is loaded and the memo did not name it. Where no compiler can be
  // loaded, the prebuilt tier's identity still finds its entries.
  // The compiler identity the first prebuilt tier holding one for `vendor` was built with. Tiers
  // of one search path are meant to be built with one compiler: a tier built with another has
  // keys of its own, which lookups with this identity do not find.
  std::optional<CompilerIdentity> shipped_identity(Vendor vendor) const {
    for (const cache::DiskStore *tier : tiers_.prebuilt())
      if (std::optional<CompilerIdentity> identity = read_tier_identity(*tier, vendor))
        return identity;
    return std::nullopt;
  }

  // "DIR1, DIR2": every prebuilt tier configured, in lookup order.
  std::string tier_list() const {
    return join(config_.prebuilt_tiers(), ", ",
                [](const std::filesystem::path &dir) { return dir.string(); });
  }

  CompilerIdentity compiler_identity(Vendor vendor) {
    std::lock_guard lock(identity_mutex_);
    std::optional<CompilerIdentity> &known = identities_[static_cast<int>(vendor)];
    if (config_.mode == Mode::prebuilt && !known)
      known = shipped_identity(vendor);
    const jit::Compiler *loaded = config_.compilers ? nullptr : ProcessCompilers::loaded(vendor);
    if (!known && memo_)
      known = memo_->read(vendor);
    if (config_.mode == Mode::prebuilt && known)
      return *known;
    if (!loaded && known)
      return *known;
    if (!loaded) {
      try {
        loaded = &compiler(vendor);
      } catch (const Error &error) {
        if (error.code() != Errc::compiler_unavailable)
          throw;
        std::optional<CompilerIdentity> shipped = shipped_identity(vendor);
        if (shipped)
          return *shipped; // not remembered: a compiler installed later is loaded then
        if (config_.mode == Mode::prebuilt)
          throw Error(Errc::not_prebuilt, "the prebuilt tiers (" + tier_list() + ") hold no " +
                                              std::string(to_string(vendor)) +
                                              " variants (no compiler identity) "
                                              "and KJIT_MODE=prebuilt forbids compiling: " +
                                              error.summary());
        throw;
      }
    }
    if (CompilerIdentity identity = CompilerIdentity::of(*loaded); identity != known) {
      if (memo_ && config_.mode == Mode::jit) // a prebuilt-mode process writes nothing
        memo_->write(*loaded);
      known = std::move(identity);
    }
    return *known;
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
      not_prebuilt(instance, target);

    const jit::Compiler &jit_compiler = compiler(target.vendor());
    jit_compiler.check_supported(target);
    if (CompilerIdentity loaded = compiler_identity(target.vendor()); loaded != variant.compiler) {
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
    // Read before the compile, so that what is recorded is at most as new as what it reads.
    std::vector<cache::RecordedHeader> headers;
    if (variant.has_include_dirs())
      headers = scan_includes(variant.request, instance.source_template().name());

    {
      std::lock_guard counting(counters_mutex_);
      ++counters_.misses;
    }
    if (log().should_log(spdlog::level::debug))
      log().debug("compiling {} ({}) for {}: {}", instance.source_template().name(),
                  instance.canonical_params(), target.id(), why_compiling(instance, variant));
    const auto started = std::chrono::steady_clock::now();
    const VariantDescription keyed =
        variant.has_include_dirs() ? keyed_with_headers(variant, headers) : variant;
    jit::CompileResult result =
        compile_variant(jit_compiler, keyed.request, instance.source_template());
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    {
      std::lock_guard counting(counters_mutex_);
      ++counters_.compiles;
      counters_.compile_ms += compile_ms;
    }

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
  std::optional<CompilerMemo> memo_; // beside the user tier
  std::mutex identity_mutex_;
  std::optional<CompilerIdentity> identities_[2]; // per vendor, as last known to this Runtime
  mutable std::mutex counters_mutex_; // the slow path's counters: one update per disk access
  cache::CacheCounters counters_;

  MemoryTier<CodeObject> code_objects_;
  MemoryTier<Kernel> kernels_;
  std::atomic<const Device *> default_device_ = nullptr;

  // A module stays loaded, and its kernel valid, for the Runtime's life.
  struct Loaded {
    Module module;
    Kernel kernel;
  };
  std::mutex loaded_mutex_;
  std::map<std::pair<cache::Key, std::uint64_t>, std::unique_ptr<Loaded>> loaded_;
  std::mutex objects_mutex_;
  // A variant's key and the newest code object version its lookup accepted.
  using ObjectKey = std::pair<cache::Key, int>;
  std::map<ObjectKey, std::unique_ptr<CodeObject>> objects_;
  std::map<ObjectKey, std::shared_future<const CodeObject *>> in_flight_;
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

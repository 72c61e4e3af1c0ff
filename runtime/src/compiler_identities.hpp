#pragma once
// Where a Runtime's compilers come from, and the identity its keys give each one
// (docs/ARCHITECTURE.md, "The first call", step 3).
#include "compiler_memo.hpp"
#include "kjit/cache/disk_store.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/runtime/config.hpp"
#include "variant.hpp"

#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

namespace kjit {

// Config::compilers where given, else one compiler per vendor for the whole process: loading one
// reads the target list and version from the vendor library, which a fresh Runtime should not pay
// for again. A failed load is retried on the next request.
class Compilers {
public:
  explicit Compilers(std::function<const jit::Compiler &(Vendor)> given)
      : given_(std::move(given)) {}
  // Loads `vendor`'s compiler once. Throws Error(compiler_unavailable) and what loading throws.
  const jit::Compiler &load(Vendor vendor) const;
  // Whether this process has loaded `vendor`'s compiler already (never with Config::compilers).
  bool loaded(Vendor vendor) const;

private:
  std::function<const jit::Compiler &(Vendor)> given_;
};

// What keys need of each vendor's compiler. In prebuilt mode: the identity the prebuilt tiers were
// built with, so that no compiler is needed (nor consulted: one installed since must not change the
// keys of what was shipped). Otherwise the loaded compiler's once this process has loaded it, else
// the memo's (compiler_memo.hpp), so that a process whose variants are all cached never loads it;
// the memo is written when the compiler is loaded and the memo did not name it. Where no compiler
// can be loaded, the prebuilt tiers' identity still finds their entries.
class CompilerIdentities {
public:
  // `prebuilt`: the prebuilt tiers in lookup order; `memo_directory`: the user tier's compilers
  // directory, or empty without one. `tier_list`: the prebuilt tiers configured, for errors.
  CompilerIdentities(const Compilers &compilers, Mode mode,
                     std::vector<const cache::DiskStore *> prebuilt,
                     const std::filesystem::path &memo_directory, std::string tier_list);

  // Throws Error(not_prebuilt) in prebuilt mode when no tier holds an identity and no compiler
  // loads, else what loading the compiler throws when neither memo nor tier names it.
  CompilerIdentity of(Vendor vendor);

private:
  // The identity known without loading the compiler: the shipped one in prebuilt mode, the memo's.
  std::optional<CompilerIdentity> remembered(Vendor vendor) const;
  // The identity the first prebuilt tier holding one for `vendor` was built with. Tiers of one
  // search path are meant to be built with one compiler: a tier built with another has keys of its
  // own, which lookups with this identity do not find.
  std::optional<CompilerIdentity> shipped(Vendor vendor) const;
  // Where `vendor`'s compiler cannot be loaded (`error`): the shipped identity, not remembered (a
  // compiler installed later is loaded then); else throws.
  CompilerIdentity without_compiler(Vendor vendor, const Error &error) const;

  const Compilers &compilers_;
  Mode mode_;
  std::vector<const cache::DiskStore *> prebuilt_;
  std::optional<CompilerMemo> memo_;
  std::string tier_list_;
  std::mutex mutex_;
  std::optional<CompilerIdentity> known_[2]; // per vendor, as last known to this Runtime
};

} // namespace kjit

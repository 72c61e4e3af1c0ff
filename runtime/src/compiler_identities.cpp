#include "compiler_identities.hpp"

#include "kjit/error.hpp"

#include <memory>

namespace kjit {

namespace {

std::mutex process_mutex;
std::unique_ptr<jit::Compiler> process_compilers[2];

} // namespace

const jit::Compiler &Compilers::load(Vendor vendor) const {
  if (given_)
    return given_(vendor);
  std::lock_guard lock(process_mutex);
  auto &slot = process_compilers[static_cast<int>(vendor)];
  if (!slot)
    slot = jit::load_compiler(vendor);
  return *slot;
}

bool Compilers::loaded(Vendor vendor) const {
  if (given_)
    return false;
  std::lock_guard lock(process_mutex);
  return process_compilers[static_cast<int>(vendor)] != nullptr;
}

CompilerIdentities::CompilerIdentities(const Compilers &compilers, Mode mode,
                                       std::vector<const cache::DiskStore *> prebuilt,
                                       const std::filesystem::path &memo_directory,
                                       std::string tier_list)
    : compilers_(compilers), mode_(mode), prebuilt_(std::move(prebuilt)),
      tier_list_(std::move(tier_list)) {
  if (!memo_directory.empty())
    memo_.emplace(memo_directory);
}

CompilerIdentity CompilerIdentities::of(Vendor vendor) {
  std::lock_guard lock(mutex_);
  std::optional<CompilerIdentity> &known = known_[static_cast<int>(vendor)];
  if (!known)
    known = remembered(vendor);
  if (known && (mode_ == Mode::prebuilt || !compilers_.loaded(vendor)))
    return *known;
  const jit::Compiler *compiler = nullptr;
  try {
    compiler = &compilers_.load(vendor);
  } catch (const Error &error) {
    if (error.code() != Errc::compiler_unavailable)
      throw;
    return without_compiler(vendor, error);
  }
  if (CompilerIdentity identity = CompilerIdentity::of(*compiler); identity != known) {
    if (memo_ && mode_ == Mode::jit) // a prebuilt-mode process writes nothing
      memo_->write(*compiler);
    known = std::move(identity);
  }
  return *known;
}

std::optional<CompilerIdentity> CompilerIdentities::remembered(Vendor vendor) const {
  std::optional<CompilerIdentity> identity;
  if (mode_ == Mode::prebuilt)
    identity = shipped(vendor);
  if (!identity && memo_)
    identity = memo_->read(vendor);
  return identity;
}

std::optional<CompilerIdentity> CompilerIdentities::shipped(Vendor vendor) const {
  for (const cache::DiskStore *tier : prebuilt_)
    if (std::optional<CompilerIdentity> identity = read_tier_identity(*tier, vendor))
      return identity;
  return std::nullopt;
}

CompilerIdentity CompilerIdentities::without_compiler(Vendor vendor, const Error &error) const {
  if (std::optional<CompilerIdentity> identity = shipped(vendor))
    return *identity;
  if (mode_ == Mode::prebuilt)
    throw Error(Errc::not_prebuilt, "the prebuilt tiers (" + tier_list_ + ") hold no " +
                                        std::string(to_string(vendor)) +
                                        " variants (no compiler identity) and KJIT_MODE=prebuilt "
                                        "forbids compiling: " +
                                        error.summary());
  throw error;
}

} // namespace kjit

#pragma once
// The modules a Runtime has loaded on its devices: one per code object and device, which stays
// loaded, and its kernel valid, for the Runtime's life.
#include "kjit/cache/key.hpp"
#include "kjit/runtime/device.hpp"
#include "kjit/runtime/kernel.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace kjit {

class LoadedModules {
public:
  // The kernel of `code` on `device` (`scope`: the device's memory-tier scope), loaded with
  // the signature `signature` makes the first time. Throws what Module::load and Module::kernel
  // throw.
  const Kernel &kernel(const CodeObject &code, const Device &device, std::uint64_t scope,
                       const std::function<KernelSignature()> &signature) {
    std::lock_guard lock(mutex_);
    auto &slot = loaded_[{code.key(), scope}];
    if (!slot) {
      Module module = Module::load(device, code.code());
      Kernel kernel = module.kernel(code.lowered_name(), signature(), code.expression());
      slot = std::make_unique<Loaded>(Loaded{std::move(module), std::move(kernel)});
    }
    return slot->kernel;
  }

private:
  struct Loaded {
    Module module;
    Kernel kernel;
  };
  std::mutex mutex_;
  std::map<std::pair<cache::Key, std::uint64_t>, std::unique_ptr<Loaded>> loaded_;
};

} // namespace kjit

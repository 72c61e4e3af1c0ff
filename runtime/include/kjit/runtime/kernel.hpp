#pragma once
// Loaded code and typed launches.
//
//   kjit::Module module = kjit::Module::load(gpu, code.code());   // cuModuleLoadData...
//   kjit::Kernel scale = module.kernel(code.lowered_name(),
//                                      kjit::KernelSignature::of<float *, float>(),
//                                      code.expression());
//   scale.launch({.grid = blocks, .block = 256, .stream = stream},  // one driver call
//                x.as<float>(), 2.0f);
//
// launch() checks the arguments against the signature (count and size of each) before the
// driver sees them, from arrays fixed at compile time: a few nanoseconds, no allocation, no lock.
#include "kjit/runtime/device.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kjit {

namespace detail {

// The spelling of T as the compiler prints it ("float*", "int"), for error messages; both GCC
// and Clang name the template argument in __PRETTY_FUNCTION__ as "T = <type>" followed by ';'
// (GCC) or ']' (Clang).
template <typename T> constexpr std::string_view type_name() {
  std::string_view function = __PRETTY_FUNCTION__;
  const std::size_t start = function.find("T = ") + 4;
  std::size_t end = function.find(';', start);
  if (end == std::string_view::npos)
    end = function.rfind(']');
  return function.substr(start, end - start);
}

} // namespace detail

// One kernel parameter as the host sees it.
struct KernelParameter {
  std::string type;        // "float*", "__half*", "int": names it in error messages
  std::uint32_t size;      // bytes the driver copies from the argument
  std::uint32_t alignment; // informational: drivers place each argument by the kernel's layout
  bool operator==(const KernelParameter &) const = default;
};

// The parameter list of a kernel, against which launches are checked.
class KernelSignature {
public:
  KernelSignature() = default; // a kernel without parameters
  explicit KernelSignature(std::vector<KernelParameter> parameters);

  // The signature of a kernel declared with parameters of these host types:
  // `KernelSignature::of<float *, float, int>()`.
  template <typename... ParamValues> static KernelSignature of() {
    return KernelSignature({KernelParameter{std::string(detail::type_name<ParamValues>()),
                                            static_cast<std::uint32_t>(sizeof(ParamValues)),
                                            static_cast<std::uint32_t>(alignof(ParamValues))}...});
  }

  const std::vector<KernelParameter> &parameters() const { return parameters_; }
  // "(float*, float, int)"
  std::string to_string() const;

  // Throws Error(bad_argument) unless Args are as many as the parameters and each is as large as
  // its parameter: "scale<__half, 4096>: argument 2 is 8 bytes (double), the kernel takes 4
  // (float)". `kernel` names the kernel in the message. Only sizes can be checked: a float passed
  // for an int parameter goes through, as it would through cuLaunchKernel.
  template <typename... Args> void check(std::string_view kernel) const {
    static constexpr std::uint32_t given[] = {static_cast<std::uint32_t>(sizeof(Args))..., 0};
    if (sizes_.size() != sizeof...(Args) ||
        !std::equal(given, given + sizeof...(Args), sizes_.begin())) [[unlikely]] {
      static constexpr std::string_view types[] = {detail::type_name<Args>()..., ""};
      report_mismatch(kernel, {given, sizeof...(Args)}, {types, sizeof...(Args)});
    }
  }

  bool operator==(const KernelSignature &other) const { return parameters_ == other.parameters_; }

private:
  [[noreturn]] void report_mismatch(std::string_view kernel,
                                    std::span<const std::uint32_t> given_sizes,
                                    std::span<const std::string_view> given_types) const;

  std::vector<KernelParameter> parameters_;
  std::vector<std::uint32_t> sizes_; // parameters_[i].size, contiguous for check()
};

class Kernel;

// How a kernel is launched, apart from its arguments: `{.grid = blocks, .block = 256}` runs on
// the device's default stream without dynamic shared memory.
struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0; // dynamic shared memory per block
  Stream stream = nullptr;   // the device's default stream when null
  // Blocks per thread-block cluster (NVIDIA sm_90 and newer: the blocks of a cluster run at once
  // on one GPC and reach each other's shared memory); each of the grid's dimensions a multiple of
  // the cluster's. {1, 1, 1}, the default, launches without clusters.
  Dim3 cluster = Dim3(1, 1, 1);
  // Programmatic dependent launch (NVIDIA sm_90 and newer: cuLaunchKernelEx with
  // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION): the launch may start while the
  // stream's previous kernel still runs, once that kernel's blocks have all run
  // griddepcontrol.launch_dependents or exited; the kernel must run griddepcontrol.wait (which
  // returns when the previous kernel has completed and its writes are visible) before it reads
  // what that kernel writes. It hides the launch's start behind the previous kernel's tail. A
  // hint: where the device or driver has no such launch (HIP, a driver without cuLaunchKernelEx)
  // the launch waits for the previous kernel as any other, which a kernel written for either
  // computes the same.
  bool overlap_previous = false;
};

// A code object loaded onto one device; unloaded (on that device's context) on destruction.
// The Kernels taken from a Module are valid while it lives. Move-only.
class Module {
public:
  // Loads a cubin or an AMDGPU code object built for device.target(). Throws
  // Error(device_error) naming the device and the driver's reason (an image for another
  // processor is CUDA_ERROR_NO_BINARY_FOR_GPU / hipErrorNoBinaryForGpu).
  static Module load(const Device &device, std::span<const std::byte> code_object);

  Module(Module &&other) noexcept;
  Module &operator=(Module &&other) noexcept;
  ~Module();

  const Device &device() const { return device_; }
  void *native_handle() const { return handle_; } // CUmodule, hipModule_t

  // The kernel whose symbol is `lowered_name` (CodeObject::lowered_name()), checked against
  // `signature` at every launch. `display_name` names it in errors (CodeObject::expression(),
  // "scale<__half, 4096>"); the lowered name when empty. Throws Error(device_error) when the
  // module has no such symbol.
  Kernel kernel(const std::string &lowered_name, KernelSignature signature,
                std::string display_name = {}) const;

private:
  Module(Device device, void *handle) : device_(device), handle_(handle) {}
  Device device_;
  void *handle_;
};

// A kernel of a loaded Module: its function handle, its device and its parameters.
class Kernel {
public:
  const Device &device() const { return device_; }
  const std::string &name() const { return name_; }
  const KernelSignature &signature() const { return signature_; }
  void *native_handle() const { return function_; } // CUfunction, hipFunction_t
  // What the code generator allotted, read from the driver when the Kernel was made.
  int registers() const { return registers_; }
  int max_threads_per_block() const { return max_threads_per_block_; }

  // Launches the kernel with `args` after checking them against the signature (see
  // KernelSignature::check): exactly one launch call to the driver (cuLaunchKernel,
  // hipModuleLaunchKernel; cuLaunchKernelEx for a cluster of more than one block or for
  // overlap_previous) with the
  // device's context current, and no allocation. Asynchronous: a fault inside the kernel surfaces
  // at the next synchronising call. Throws Error(bad_argument) before touching the driver (also
  // for a cluster that does not divide the grid, or any cluster on HIP, which has none),
  // Error(device_error) when the driver refuses the launch or lacks cuLaunchKernelEx.
  template <typename... Args> void launch(const LaunchConfig &config, const Args &...args) const {
    // The driver copies each argument's bytes; anything else (a std::vector, a class with a
    // pointer to itself) would reach the kernel as bytes that mean nothing there.
    static_assert((std::is_trivially_copyable_v<Args> && ...),
                  "kernel arguments are copied byte for byte: each must be trivially copyable");
    signature_.check<Args...>(name_);
    // The driver copies each argument through its pointer during the call, and the arguments
    // outlive it. The trailing null keeps the array non-empty for kernels without parameters.
    void *packed[] = {const_cast<void *>(static_cast<const void *>(std::addressof(args)))...,
                      nullptr};
    launch_packed(config, packed);
  }

  // Lets launches take up to `bytes` of dynamic shared memory (CUDA asks for it past 48 KiB;
  // a no-op on AMD). Throws Error(device_error) past the device's limit.
  void allow_shared_bytes(unsigned bytes) const;

  // How many clusters of `cluster` blocks of `block` threads with `shared_bytes` of dynamic
  // shared memory each can run at once on the device (a persistent grid's size: clusters are
  // placed whole within one GPC, so the multiprocessor count over the cluster size can be too
  // many). Throws Error(bad_argument) on a backend without clusters (HIP), Error(device_error)
  // where the driver refuses or lacks cuOccupancyMaxActiveClusters.
  int max_active_clusters(Dim3 block, Dim3 cluster, unsigned shared_bytes) const;

  // For callers that pack the arguments themselves: `args` holds one pointer per parameter, to a
  // value of exactly the parameter's size. Not checked.
  void launch_packed(const LaunchConfig &config, void **args) const;

private:
  friend class Module;
  Kernel(Device device, void *function, KernelSignature signature, std::string name, int registers,
         int max_threads_per_block)
      : device_(device), function_(function), signature_(std::move(signature)),
        name_(std::move(name)), registers_(registers),
        max_threads_per_block_(max_threads_per_block) {}

  Device device_;
  void *function_;
  KernelSignature signature_;
  std::string name_;
  int registers_;
  int max_threads_per_block_;
};

} // namespace kjit

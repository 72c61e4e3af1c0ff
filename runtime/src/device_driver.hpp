#pragma once
// The table of driver calls behind both device backends. HIP's module API mirrors the CUDA
// driver API call for call with the same C signatures (hipModuleLaunchKernel has cuLaunchKernel's
// parameters, hipModuleLoadData cuModuleLoadData's...), so one table type holds either vendor's
// functions and everything above it (device.cpp, device_kernel.cpp) is shared. What differs is
// confined to device_cuda.cpp and device_hip.cpp: the library names, the symbol names, and five
// small operations (error text, native target, and the current context).
//
// No vendor header is included: the few types are declared here and in the vendor files, each
// with the header it mirrors, so that the build needs no vendor package.
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"
#include "kjit/runtime/device.hpp"
#include "kjit/runtime/tensor_map.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kjit::detail {

// CUresult (cuda.h) and hipError_t (hip_runtime_api.h): C enums of int size, 0 for success.
using DriverResult = int;

// A context as kjit compares and restores it: the CUcontext for CUDA; for HIP, whose current
// "context" is the thread's current device, the ordinal + 1. 0 means none is current.
using Context = std::uintptr_t;

// Device addresses are CUdeviceptr (unsigned long long) for CUDA and void * for HIP. The shared
// table declares them void *: both are 64-bit values passed in the same integer registers on the
// LP64 ABIs kjit builds for (x86-64 System V, AArch64).
static_assert(sizeof(void *) == sizeof(unsigned long long), "the driver table assumes LP64");

// One entry point: its symbol (for dlsym and for messages) and its address.
template <typename Signature> struct DriverCall;
template <typename Result, typename... ParamValues> struct DriverCall<Result(ParamValues...)> {
  const char *symbol;
  Result (*function)(ParamValues...) = nullptr;
  Result operator()(ParamValues... params) const { return function(params...); }
};

// An entry for the loader: the symbol to resolve and where its address goes.
struct DriverSymbol {
  const char *symbol;
  void *slot; // the address of a DriverCall's `function`
  bool required = true;
};

template <typename Signature> DriverSymbol bind(DriverCall<Signature> &call, bool required = true) {
  return {call.symbol, &call.function, required};
}

// Stores a dlsym result into a function pointer slot (the copy avoids reading the function
// pointer's storage through a void * lvalue).
inline void store_symbol(const DriverSymbol &entry, void *address) {
  std::memcpy(entry.slot, &address, sizeof address);
}

struct DriverApi {
  Backend backend;
  std::vector<std::string> libraries; // dlopen candidates, first that loads wins
  std::string library_label;          // names the library in "not found" reasons
  // A device node the driver needs; named in the no-device reason when it is missing.
  const char *device_file;

  // Resolved from the library by symbol. Identical C signatures on both vendors.
  DriverCall<DriverResult(unsigned flags)> init;
  DriverCall<DriverResult(int *count)> device_count;
  DriverCall<DriverResult(int *device, int ordinal)> device_get;
  DriverCall<DriverResult(char *name, int length, int device)> device_name;
  DriverCall<DriverResult(void **module, const void *image)> module_load_data;
  DriverCall<DriverResult(void **function, void *module, const char *name)> module_get_function;
  DriverCall<DriverResult(void *module)> module_unload;
  DriverCall<DriverResult(void *function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                          unsigned block_x, unsigned block_y, unsigned block_z,
                          unsigned shared_bytes, void *stream, void **params, void **extra)>
      launch_kernel;
  DriverCall<DriverResult(int *value, int attribute, void *function)> function_attribute;
  DriverCall<DriverResult(void **address, std::size_t bytes)> allocate;
  DriverCall<DriverResult(void *address)> free_memory;
  DriverCall<DriverResult(void *device, const void *host, std::size_t bytes)> copy_to_device;
  DriverCall<DriverResult(void *host, const void *device, std::size_t bytes)> copy_to_host;
  DriverCall<DriverResult()> synchronize;
  // For timing (the tuner); optional: a driver without them can still launch.
  DriverCall<DriverResult(void **event, unsigned flags)> event_create;
  DriverCall<DriverResult(void *event, void *stream)> event_record;
  DriverCall<DriverResult(void *event)> event_synchronize;
  DriverCall<DriverResult(void *event)> event_destroy;
  DriverCall<DriverResult(void *address, unsigned char byte, std::size_t bytes, void *stream)>
      fill_async;

  // The vendor's own symbols, used by the operations below; resolved with the ones above.
  std::vector<DriverSymbol> vendor_symbols;

  // Vendor operations: functions of the vendor file over its own symbols. `symbol` names the
  // driver call that can fail, for messages.
  std::string (*describe)(DriverResult result); // "CUDA_ERROR_NO_DEVICE (no CUDA-capable ...)"
  DriverCall<DriverResult(int device, std::string *target)> native_target;
  DriverCall<DriverResult(int device, Context *context)> device_context;
  DriverCall<DriverResult(Context *context)> current_context;
  DriverCall<DriverResult(Context context)> set_current_context;
  DriverCall<DriverResult(int device, int *count)> multiprocessors;
  // Lets `function` take `bytes` of dynamic shared memory (cuFuncSetAttribute; CUDA asks for it
  // past 48 KiB).
  DriverCall<DriverResult(void *function, int bytes)> allow_shared_bytes;
  // cuTensorMapEncodeTiled for a 2-D map; no function on a backend without tensor maps.
  DriverCall<DriverResult(void *map, const TensorMapShape &shape)> encode_tensor_map;
  // Milliseconds between two recorded events (cuEventElapsedTime has two symbols across CUDA
  // versions, picked here).
  DriverCall<DriverResult(float *milliseconds, void *start, void *end)> event_elapsed;
  // Shared memory a block may use without opting in, in bytes.
  DriverCall<DriverResult(int device, std::size_t *bytes)> shared_bytes_per_block;
  // A launch with attributes (cuLaunchKernelEx): thread-block clusters of `cluster` blocks (none
  // for {1, 1, 1}) and, with `overlap_previous`, programmatic stream serialization (see
  // LaunchConfig); no function on a backend without clusters. Returns driver_lacks_call where the
  // driver has no such entry point.
  DriverCall<DriverResult(void *function, Dim3 grid, Dim3 block, Dim3 cluster,
                          bool overlap_previous, unsigned shared_bytes, void *stream,
                          void **params)>
      launch_cluster;
  // How many clusters of `cluster` blocks of `function` can run at once on the device
  // (cuOccupancyMaxActiveClusters); no function on a backend without clusters, driver_lacks_call
  // where the driver has no such entry point.
  DriverCall<DriverResult(int *count, void *function, Dim3 block, Dim3 cluster,
                          unsigned shared_bytes)>
      max_active_clusters;
  // The newest AMDGPU code object version the runtime loads; no function where code objects
  // have no such version (cubins).
  DriverCall<DriverResult(int *version)> newest_code_object_version;
};

// What a vendor operation returns when the driver library lacks the entry point it needs: no
// driver's own result (both vendors' are non-negative).
constexpr DriverResult driver_lacks_call = -1;

// Function attributes: HIP copied the numbers of CUfunction_attribute (cuda.h) into
// hipFunction_attribute (hip_runtime_api.h).
constexpr int function_attribute_max_threads_per_block = 0;
constexpr int function_attribute_num_regs = 4;

DriverApi &cuda_driver(); // device_cuda.cpp
DriverApi &hip_driver();  // device_hip.cpp

// The newest code object version the HIP runtime of ROCm `major`.`minor` loads (device_hip.cpp
// says why).
int code_object_version_of_hip(int major, int minor);

// One device as the backend describes it when it is opened. Its context is made lazily, on the
// device's first use: a CUDA primary context costs hundreds of MB of device memory and a good
// part of a second, which a process that enumerates eight GPUs and uses one should not pay.
struct DeviceState {
  DeviceState(const DriverApi &api_, int ordinal_, int handle_, std::string name_,
              jit::Target target_)
      : api(&api_), ordinal(ordinal_), handle(handle_), name(std::move(name_)),
        target(std::move(target_)) {}

  const DriverApi *api;
  int ordinal;
  int handle; // CUdevice, hipDevice_t
  std::string name;
  jit::Target target;
  std::optional<int> newest_code_object_version; // set when the backend has the query

  // The device's context, made on the first call (cuDevicePrimaryCtxRetain; the ordinal for
  // HIP). Throws Error(device_error); a later call tries again.
  Context context() const {
    Context made = context_.load(std::memory_order_acquire);
    return made != 0 ? made : make_context();
  }

private:
  Context make_context() const;
  mutable std::atomic<Context> context_{0};
  mutable std::mutex context_mutex_; // held while the context is made
};

// "CUDA device 0 (NVIDIA H100 80GB HBM3)"
std::string describe_device(const DeviceState &device);

// Error(device_error): "<symbol> on <device> failed: <driver's reason>".
[[noreturn]] void throw_driver_error(const DeviceState &device, const char *symbol,
                                     DriverResult result);

template <typename Signature>
void check(const DeviceState &device, const DriverCall<Signature> &call, DriverResult result) {
  if (result != 0) [[unlikely]]
    throw_driver_error(device, call.symbol, result);
}

// Logs a failure where nothing can be thrown (destructors).
void warn_driver_error(const DeviceState &device, const char *symbol, DriverResult result);

struct DeviceAccess {
  static const DeviceState &state(const Device &device) { return *device.state_; }
  static Device device(const DeviceState &state) { return Device(&state); }
};

// Makes `device`'s context current for the scope and restores the thread's previous one after,
// so that kjit never changes the device the calling code works on. A thread that had no current
// context keeps kjit's, as the CUDA runtime does on first use.
//
// Why ask the driver instead of remembering in a thread_local which context kjit made current:
// the host program switches contexts behind kjit's back (cudaSetDevice, hipSetDevice, a
// framework's device guard), and a stale thread_local would launch into the wrong context. The
// question is a read of the driver's own thread-local state (cuCtxGetCurrent, hipGetDevice), so
// in the steady state, the caller's device current, a launch is that read and the launch call.
class ScopedContext {
public:
  explicit ScopedContext(const DeviceState &device) : device_(device) {
    const DriverApi &api = *device.api;
    const Context wanted = device.context();
    check(device, api.current_context, api.current_context(&previous_));
    if (previous_ != wanted) [[unlikely]] {
      check(device, api.set_current_context, api.set_current_context(wanted));
      restore_ = previous_ != 0;
    }
  }
  ~ScopedContext() {
    if (restore_) [[unlikely]] {
      const DriverApi &api = *device_.api;
      if (DriverResult result = api.set_current_context(previous_); result != 0)
        warn_driver_error(device_, api.set_current_context.symbol, result);
    }
  }
  ScopedContext(const ScopedContext &) = delete;
  ScopedContext &operator=(const ScopedContext &) = delete;

private:
  const DeviceState &device_;
  Context previous_ = 0;
  bool restore_ = false;
};

// A backend after opening: its devices, or the reason there are none.
struct OpenedBackend {
  OpenedBackend() = default;
  OpenedBackend(OpenedBackend &&) = default; // a deque's elements stay where they are
  OpenedBackend(const OpenedBackend &) = delete;
  OpenedBackend &operator=(const OpenedBackend &) = delete;

  std::deque<DeviceState> states; // the Devices point into it
  std::vector<Device> devices;    // one per state, in driver order
  std::string no_device_reason;   // "cuInit failed: CUDA_ERROR_NO_DEVICE (...)"; set when empty
};

// Opens `api`'s library, resolves its symbols (storing them only when all resolve), initialises
// the driver and describes every device. Never throws. devices() keeps one result per backend
// for the process. A copy of a table shares the vendor file's own symbols with the original, so
// a process opens one library per vendor: the tests open copies only under names that fail
// before anything is stored, and the fake-driver tests run in a binary of their own.
OpenedBackend open_backend(DriverApi &api);

} // namespace kjit::detail

#pragma once
// GPUs and their memory, through one of two driver backends: HIP (libamdhip64) or the CUDA
// driver API (libcuda). Both libraries are opened with dlopen on first use, never linked, so one
// build runs where either, both or neither is installed. The two backends share every line but
// a thin table of driver calls (runtime/src/device_driver.hpp).
//
//   const kjit::Device &gpu = kjit::devices().front();   // KJIT_BACKEND=auto|hip|cuda
//   gpu.target().id();                                     // "sm_90a", "gfx90a:sramecc+:xnack-"
//   kjit::DeviceBuffer x = gpu.allocate(n * sizeof(float));
//
// Kernels are loaded and launched through kjit/runtime/kernel.hpp.
#include "kjit/jit/target.hpp"
#include "kjit/vendor.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kjit {

namespace detail {
struct DeviceState;
struct DeviceAccess;
} // namespace detail

class DeviceBuffer;

enum class Backend { hip, cuda };
std::string_view to_string(Backend backend); // "HIP", "CUDA"

// Which backend devices() opens. `automatic`: HIP when it finds a device, else CUDA.
enum class BackendChoice { automatic, hip, cuda };

// "auto", "hip" or "cuda"; throws Error(bad_config) naming KJIT_BACKEND and what it accepts.
BackendChoice parse_backend_choice(std::string_view text);
// KJIT_BACKEND, `automatic` when unset or empty.
BackendChoice backend_choice_from_environment();

// A grid or block shape. Converts from one number for 1-D launches: `{.grid = blocks, .block =
// 256}`.
struct Dim3 {
  constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  unsigned x, y, z;
};

// A native stream handle (CUstream, hipStream_t) of the kernel's device; nullptr is the device's
// default stream. kjit neither creates nor owns streams.
using Stream = void *;

// One GPU. A cheap handle (one pointer) to state that lives as long as the process: copy it
// freely. Driver calls made on its behalf run with its context current and leave the calling
// thread's current context as they found it (see ScopedContext in device_driver.hpp).
class Device {
public:
  Backend backend() const;
  Vendor vendor() const;
  // The driver's ordinal: the N of CUDA_VISIBLE_DEVICES order, hipSetDevice(N), cuDeviceGet(N).
  int ordinal() const;
  const std::string &name() const; // "NVIDIA H100 80GB HBM3", "AMD Instinct MI210"
  // The target to compile for: the full AMD id with the device's features
  // ("gfx90a:sramecc+:xnack-", from hipDeviceProp_t::gcnArchName), or for NVIDIA the
  // arch-specific id from compute capability 9.0 on ("sm_90a": wgmma and the other 9.0-only
  // instructions are usable) and the plain one before ("sm_80"). Arch-specific code runs on
  // exactly that compute capability, which is what a per-device JIT cache wants; the target is
  // part of every cache key, so an sm_90a entry is never loaded for another processor.
  const jit::Target &target() const;
  // The newest AMDGPU code object version this device's runtime loads (HIP); nullopt where code
  // objects carry no such version (CUDA). HIP has no query for it, so it is derived from the HIP
  // runtime's release (hipRuntimeGetVersion): 6, which generic targets need, from ROCm 6.4, the
  // first whose runtime loads generic code objects; 5 from ROCm 6.0, whose compilers emit it by
  // default; 4 before. Lookups skip cached code this device could not load.
  std::optional<int> newest_code_object_version() const;

  // Streaming multiprocessors (NVIDIA) or compute units (AMD): a persistent kernel's grid, and
  // what, with the target, makes two GPUs one model for tuning. Read from the driver on each call.
  // Throws Error(device_error).
  int multiprocessors() const;

  // Throws Error(device_error) when the driver refuses (out of memory...).
  DeviceBuffer allocate(std::size_t bytes) const;
  // Waits until all work queued on the device has finished (cuCtxSynchronize,
  // hipDeviceSynchronize); reports a kernel fault as Error(device_error).
  void synchronize() const;

  // Shared memory a block may use, in bytes. Throws Error(device_error).
  std::size_t shared_memory_per_block() const;
  // Sets `bytes` bytes of device memory at `address` to `byte`, queued on `stream`
  // (cuMemsetD8Async). Throws Error(device_error).
  void fill(void *address, unsigned char byte, std::size_t bytes, Stream stream) const;
  // Copies `bytes` bytes of device memory at `address` (any allocation of this device, the
  // caller's own too) to `host`, after the work on the default stream. Throws Error(device_error).
  void copy_to_host(void *host, const void *address, std::size_t bytes) const;

  bool operator==(const Device &other) const { return state_ == other.state_; }

private:
  friend struct detail::DeviceAccess;
  explicit Device(const detail::DeviceState *state) : state_(state) {}
  const detail::DeviceState *state_;
};

// The GPUs of the backend `choice` selects, in driver order; the span stays valid for the
// process's life. The driver is opened and the devices described once per process and backend.
// Throws Error(no_device) with the reason when there is none: "no GPU: libcuda.so.1 not found
// (...)", "no GPU: cuInit failed: CUDA_ERROR_NO_DEVICE (...)"; with `automatic`, the reason of
// each backend. Never aborts the process.
std::span<const Device> devices(BackendChoice choice);
// devices(backend_choice_from_environment()).
std::span<const Device> devices();

// Times work queued on a stream with two device events: start(), the work, stop(), then
// elapsed_ms() waits for the work and returns the time between them on the device.
class EventTimer {
public:
  // Throws Error(device_error) when the driver has no events or refuses to make them.
  explicit EventTimer(const Device &device);
  ~EventTimer();
  EventTimer(const EventTimer &) = delete;
  EventTimer &operator=(const EventTimer &) = delete;

  void start(Stream stream);
  void stop(Stream stream);
  double elapsed_ms() const;

private:
  Device device_;
  void *start_ = nullptr;
  void *stop_ = nullptr;
};

// Device memory, freed on destruction. Move-only; a moved-from buffer is empty.
class DeviceBuffer {
public:
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  ~DeviceBuffer();

  // The device address, to pass to a kernel: `buffer.as<float>()` for a `float *` parameter.
  void *data() const { return address_; }
  template <typename T> T *as() const { return static_cast<T *>(address_); }
  std::size_t size() const { return bytes_; }
  const Device &device() const { return device_; }

  // Synchronous copies of `bytes` bytes between the host and the start of the buffer, ordered
  // after work on the device's default stream. Throw Error(bad_argument) when `bytes` exceeds
  // size(), Error(device_error) when the driver refuses.
  void write(const void *host, std::size_t bytes);
  void read(void *host, std::size_t bytes) const;
  // Whole-span forms: `buffer.write(std::span(values))`.
  template <typename T> void write(std::span<T> values) {
    write(values.data(), values.size_bytes());
  }
  template <typename T> void read(std::span<T> values) const {
    read(values.data(), values.size_bytes());
  }

private:
  friend class Device;
  DeviceBuffer(Device device, void *address, std::size_t bytes)
      : device_(device), address_(address), bytes_(bytes) {}
  Device device_;
  void *address_ = nullptr;
  std::size_t bytes_ = 0;
};

} // namespace kjit

// The HIP backend: libamdhip64 from ROCm. Its module API mirrors the CUDA driver API (see
// device_driver.hpp); declarations follow hip_runtime_api.h of ROCm 5.2 and, for the
// ROCm 6 properties layout, of ROCm 6 and later.
#include "device_driver.hpp"

#include <array>
#include <cstddef>
#include <cstring>
#include <string>

namespace kjit::detail {
namespace {

// hipDeviceProp_t up to gcnArchName, the one field kjit reads, in both layouts HIP has had.
// ROCm 5 (hipDeviceProp_tR0000 from ROCm 6 on), filled by hipGetDeviceProperties:
struct PropertiesR0000 {
  char name[256];
  std::size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize, maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate,
      memoryClockRate, memoryBusWidth;
  std::size_t totalConstMem;
  int major, minor, multiProcessorCount, l2CacheSize, maxThreadsPerMultiProcessor, computeMode,
      clockInstructionRate;
  unsigned arch; // hipDeviceArch_t: 17 one-bit fields of an unsigned
  int concurrentKernels, pciDomainID, pciBusID, pciDeviceID;
  std::size_t maxSharedMemoryPerMultiProcessor;
  int isMultiGpuBoard, canMapHostMemory, gcnArch;
  char gcnArchName[256];
};
// offsetof(hipDeviceProp_t, gcnArchName) with ROCm 5.2's header.
static_assert(offsetof(PropertiesR0000, gcnArchName) == 396);

// ROCm 6 and later (hipDeviceProp_tR0600), filled by hipGetDevicePropertiesR0600:
struct PropertiesR0600 {
  char name[256];
  char uuid[16];
  char luid[8];
  unsigned luidDeviceNodeMask;
  std::size_t totalGlobalMem, sharedMemPerBlock;
  int regsPerBlock, warpSize;
  std::size_t memPitch;
  int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
  std::size_t totalConstMem;
  int major, minor;
  std::size_t textureAlignment, texturePitchAlignment;
  int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated, canMapHostMemory,
      computeMode, maxTexture1D, maxTexture1DMipmap, maxTexture1DLinear, maxTexture2D[2],
      maxTexture2DMipmap[2], maxTexture2DLinear[3], maxTexture2DGather[2], maxTexture3D[3],
      maxTexture3DAlt[3], maxTextureCubemap, maxTexture1DLayered[2], maxTexture2DLayered[3],
      maxTextureCubemapLayered[2], maxSurface1D, maxSurface2D[2], maxSurface3D[3],
      maxSurface1DLayered[2], maxSurface2DLayered[3], maxSurfaceCubemap,
      maxSurfaceCubemapLayered[2];
  std::size_t surfaceAlignment;
  int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, pciDomainID, tccDriver,
      asyncEngineCount, unifiedAddressing, memoryClockRate, memoryBusWidth, l2CacheSize,
      persistingL2CacheMaxSize, maxThreadsPerMultiProcessor, streamPrioritiesSupported,
      globalL1CacheSupported, localL1CacheSupported;
  std::size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor, managedMemory, isMultiGpuBoard, multiGpuBoardGroupID,
      hostNativeAtomicSupported, singleToDoublePrecisionPerfRatio, pageableMemoryAccess,
      concurrentManagedAccess, computePreemptionSupported, canUseHostPointerForRegisteredMem,
      cooperativeLaunch, cooperativeMultiDeviceLaunch;
  std::size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables, directManagedMemAccessFromHost,
      maxBlocksPerMultiProcessor, accessPolicyMaxWindowSize;
  std::size_t reservedSharedMemPerBlock;
  int hostRegisterSupported, sparseHipArraySupported, hostRegisterReadOnlySupported,
      timelineSemaphoreInteropSupported, memoryPoolsSupported, gpuDirectRDMASupported;
  unsigned gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned memoryPoolSupportedHandleTypes;
  int deferredMappingHipArraySupported, ipcEventSupported, clusterLaunch, unifiedFunctionPointers,
      reserved[63], hipReserved[32];
  char gcnArchName[256];
};
// offsetof(hipDeviceProp_tR0600, gcnArchName), as ROCm's header lays it out.
static_assert(offsetof(PropertiesR0600, gcnArchName) == 1160);

// Room for either whole struct (ROCm 6's is 1.5 KB, members past gcnArchName included).
constexpr std::size_t properties_room = 4096;

// HIP-only calls. The properties functions are optional: a library has one or the other.
struct HipCalls {
  DriverCall<const char *(DriverResult)> get_error_name{"hipGetErrorName"};
  DriverCall<const char *(DriverResult)> get_error_string{"hipGetErrorString"};
  DriverCall<DriverResult(void *, int)> get_properties_r0600{"hipGetDevicePropertiesR0600"};
  DriverCall<DriverResult(void *, int)> get_properties_r0000{"hipGetDeviceProperties"};
  DriverCall<DriverResult(int *)> get_device{"hipGetDevice"};
  DriverCall<DriverResult(int)> set_device{"hipSetDevice"};
  DriverCall<DriverResult(float *, void *, void *)> event_elapsed{"hipEventElapsedTime"};
  DriverCall<DriverResult(int *)> runtime_version{"hipRuntimeGetVersion"};
};
HipCalls hip;

constexpr DriverResult hip_error_not_supported = 801; // hipErrorNotSupported

std::string describe(DriverResult result) {
  const char *name = hip.get_error_name(result);
  const char *text = hip.get_error_string(result);
  if (name == nullptr)
    return "HIP error " + std::to_string(result);
  // ROCm 5 returns the name again as the description.
  if (text == nullptr || std::strcmp(name, text) == 0)
    return name;
  return std::string(name) + " (" + text + ")";
}

// The device's properties struct, in the layout of whichever entry point the runtime has:
// `field` receives the offset of the member `r0600` / `r0000` names in that layout.
using Properties = std::array<char, properties_room>;
DriverResult read_properties(int device, Properties &properties, std::size_t r0600,
                             std::size_t r0000, std::size_t *field) {
  if (hip.get_properties_r0600.function != nullptr) {
    *field = r0600;
    return hip.get_properties_r0600(properties.data(), device);
  }
  if (hip.get_properties_r0000.function != nullptr) {
    *field = r0000;
    return hip.get_properties_r0000(properties.data(), device);
  }
  return hip_error_not_supported;
}

// The full target id with the device's features ("gfx90a:sramecc+:xnack-"), which only the
// properties struct carries.
DriverResult native_target(int device, std::string *target) {
  alignas(std::max_align_t) Properties properties{};
  std::size_t arch_offset = 0;
  const DriverResult result =
      read_properties(device, properties, offsetof(PropertiesR0600, gcnArchName),
                      offsetof(PropertiesR0000, gcnArchName), &arch_offset);
  if (result == 0) {
    const char *arch = properties.data() + arch_offset;
    target->assign(arch, strnlen(arch, sizeof PropertiesR0000::gcnArchName));
  }
  return result;
}

// One fixed-size member of the properties struct, at offset `r0600` or `r0000` of the layout the
// runtime has.
template <typename Member>
DriverResult read_property(int device, std::size_t r0600, std::size_t r0000, Member *value) {
  alignas(std::max_align_t) Properties properties{};
  std::size_t offset = 0;
  const DriverResult result = read_properties(device, properties, r0600, r0000, &offset);
  if (result == 0)
    std::memcpy(value, properties.data() + offset, sizeof *value);
  return result;
}

DriverResult shared_bytes_per_block(int device, std::size_t *bytes) {
  return read_property(device, offsetof(PropertiesR0600, sharedMemPerBlock),
                       offsetof(PropertiesR0000, sharedMemPerBlock), bytes);
}

DriverResult multiprocessors(int device, int *count) {
  return read_property(device, offsetof(PropertiesR0600, multiProcessorCount),
                       offsetof(PropertiesR0000, multiProcessorCount), count);
}

DriverResult event_elapsed(float *milliseconds, void *start, void *end) {
  return hip.event_elapsed(milliseconds, start, end);
}

// HIP's current context is the thread's current device; ordinal + 1, so that 0 stays "none".
DriverResult device_context(int device, Context *context) {
  *context = static_cast<Context>(device) + 1;
  return 0;
}

DriverResult current_context(Context *context) {
  int device = 0;
  DriverResult result = hip.get_device(&device);
  *context = static_cast<Context>(device) + 1;
  return result;
}

DriverResult set_current_context(Context context) {
  return hip.set_device(static_cast<int>(context - 1));
}

// HIP has no query for the code object versions its loader takes; they follow the release, which
// hipRuntimeGetVersion gives as HIP_VERSION (major * 10,000,000 + minor * 100,000 + patch; HIP's
// release is its ROCm's).
DriverResult newest_code_object_version(int *version) {
  int hip_version = 0;
  const DriverResult result = hip.runtime_version(&hip_version);
  if (result == 0)
    *version = code_object_version_of_hip(hip_version / 10'000'000, hip_version / 100'000 % 100);
  return result;
}

// AMD kernels take the dynamic LDS they are launched with, up to the device's limit: no opt-in.
DriverResult allow_shared_bytes(void *, int) { return 0; }

} // namespace

// Code object v6 (generic targets) from ROCm 6.4, whose HIP runtime was the first to load generic
// code objects; v5 from ROCm 6.0, whose compilers emit it by default; before, v4, ROCm 5's default
// (ROCm 5 runtimes loaded v5 only in some releases: v4 is the one they all load).
int code_object_version_of_hip(int major, int minor) {
  if (major > 6 || (major == 6 && minor >= 4))
    return 6;
  return major == 6 ? 5 : 4;
}

DriverApi &hip_driver() {
  static DriverApi api{
      .backend = Backend::hip,
      // The unversioned name is what a ROCm install's ldconfig or LD_LIBRARY_PATH provides; the
      // sonames cover a runtime-only install, newest first.
      .libraries = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"},
      .library_label = "libamdhip64",
      .device_file = "/dev/kfd", // ROCm reports its absence only as hipErrorInvalidDevice
      .init = {"hipInit"},
      .device_count = {"hipGetDeviceCount"},
      .device_get = {"hipDeviceGet"},
      .device_name = {"hipDeviceGetName"},
      .module_load_data = {"hipModuleLoadData"},
      .module_get_function = {"hipModuleGetFunction"},
      .module_unload = {"hipModuleUnload"},
      .launch_kernel = {"hipModuleLaunchKernel"},
      .function_attribute = {"hipFuncGetAttribute"},
      .allocate = {"hipMalloc"},
      .free_memory = {"hipFree"},
      .copy_to_device = {"hipMemcpyHtoD"},
      .copy_to_host = {"hipMemcpyDtoH"},
      .synchronize = {"hipDeviceSynchronize"},
      .event_create = {"hipEventCreateWithFlags"},
      .event_record = {"hipEventRecord"},
      .event_synchronize = {"hipEventSynchronize"},
      .event_destroy = {"hipEventDestroy"},
      .fill_async = {"hipMemsetD8Async"},
      .vendor_symbols = {bind(hip.get_error_name), bind(hip.get_error_string),
                         bind(hip.get_properties_r0600, false),
                         bind(hip.get_properties_r0000, false), bind(hip.get_device),
                         bind(hip.set_device), bind(hip.event_elapsed, false),
                         bind(hip.runtime_version)},
      .describe = describe,
      .native_target = {"hipGetDeviceProperties", native_target},
      .device_context = {"hipSetDevice", device_context},
      .current_context = {"hipGetDevice", current_context},
      .set_current_context = {"hipSetDevice", set_current_context},
      .multiprocessors = {"hipGetDeviceProperties", multiprocessors},
      .allow_shared_bytes = {"hipModuleLaunchKernel", allow_shared_bytes},
      .encode_tensor_map = {"tensor maps (NVIDIA only)"}, // no function: AMD has none
      .event_elapsed = {"hipEventElapsedTime", event_elapsed},
      .shared_bytes_per_block = {"hipGetDeviceProperties", shared_bytes_per_block},
      .launch_cluster = {"thread-block clusters (NVIDIA only)"}, // no function: HIP has none
      .max_active_clusters = {"thread-block clusters (NVIDIA only)"},
      .newest_code_object_version = {"hipRuntimeGetVersion", newest_code_object_version},
  };
  return api;
}

} // namespace kjit::detail

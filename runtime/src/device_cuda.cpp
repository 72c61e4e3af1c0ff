// The CUDA driver API backend: libcuda.so.1, installed with the NVIDIA driver. Symbol names are
// the ones cuda.h (CUDA 13.0) maps its API names to: cuMemAlloc is cuMemAlloc_v2 and so on;
// cuLaunchKernel is the legacy-default-stream entry point (cuda.h maps it to
// cuLaunchKernel_ptsz only under CUDA_API_PER_THREAD_DEFAULT_STREAM).
#include "device_driver.hpp"

#include <cstdint>
#include <string>

namespace kjit::detail {
namespace {

// CUdevice_attribute (cuda.h).
constexpr int compute_capability_major = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int compute_capability_minor = 76; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int multiprocessor_count = 16;     // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int shared_memory_per_block = 8;   // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK
constexpr DriverResult not_found = 500;      // CUDA_ERROR_NOT_FOUND

// CUDA-only calls. CUcontext is a pointer to an opaque struct, declared void * here.
struct CudaCalls {
  DriverCall<DriverResult(DriverResult, const char **)> get_error_name{"cuGetErrorName"};
  DriverCall<DriverResult(DriverResult, const char **)> get_error_string{"cuGetErrorString"};
  DriverCall<DriverResult(int *, int, int)> device_get_attribute{"cuDeviceGetAttribute"};
  DriverCall<DriverResult(void **, int)> primary_context_retain{"cuDevicePrimaryCtxRetain"};
  DriverCall<DriverResult(void **)> context_get_current{"cuCtxGetCurrent"};
  DriverCall<DriverResult(void *)> context_set_current{"cuCtxSetCurrent"};
  // cuda.h maps cuEventElapsedTime to the _v2 symbol from CUDA 12.8 on; older drivers have the
  // first only.
  DriverCall<DriverResult(float *, void *, void *)> event_elapsed_v2{"cuEventElapsedTime_v2"};
  DriverCall<DriverResult(float *, void *, void *)> event_elapsed_v1{"cuEventElapsedTime"};
  DriverCall<DriverResult(void *, int, int)> function_set_attribute{"cuFuncSetAttribute"};
  // CUresult (CUtensorMap *, CUtensorMapDataType, cuuint32_t rank, void *address,
  // const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
  // const cuuint32_t *element_strides, interleave, swizzle, l2 promotion, oob fill): the enums
  // are ints. Drivers before CUDA 12 lack it; kjit runs on them without tensor maps.
  DriverCall<DriverResult(void *, int, unsigned, void *, const std::uint64_t *,
                          const std::uint64_t *, const unsigned *, const unsigned *, int, int, int,
                          int)>
      tensor_map_encode_tiled{"cuTensorMapEncodeTiled"};
  // CUresult (const CUlaunchConfig *, CUfunction, void **params, void **extra). Drivers before
  // CUDA 12 lack it; they launch without clusters.
  DriverCall<DriverResult(const void *, void *, void **, void **)> launch_kernel_ex{
      "cuLaunchKernelEx"};
  // CUresult (int *clusters, CUfunction, const CUlaunchConfig *), CUDA 12.0 like the above.
  DriverCall<DriverResult(int *, void *, const void *)> occupancy_max_active_clusters{
      "cuOccupancyMaxActiveClusters"};
};
CudaCalls cuda;

std::string describe(DriverResult result) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (cuda.get_error_name(result, &name) != 0 || name == nullptr)
    return "CUDA error " + std::to_string(result);
  if (cuda.get_error_string(result, &text) != 0 || text == nullptr)
    return name;
  return std::string(name) + " (" + text + ")";
}

// From compute capability 9.0 on, NVIDIA splits each processor's instructions into a portable
// set (sm_90) and an arch-specific one (sm_90a: wgmma, setmaxnreg) that only that compute
// capability runs. Code JIT-compiled for the device it runs on should have all of them.
DriverResult native_target(int device, std::string *target) {
  int major = 0;
  int minor = 0;
  if (DriverResult result = cuda.device_get_attribute(&major, compute_capability_major, device))
    return result;
  if (DriverResult result = cuda.device_get_attribute(&minor, compute_capability_minor, device))
    return result;
  *target = "sm_" + std::to_string(major * 10 + minor) + (major >= 9 ? "a" : "");
  return 0;
}

// The primary context, the one the CUDA runtime (and so PyTorch, CuPy) uses: memory and modules
// are shared with the host program. Retained for the process's life.
DriverResult primary_context(int device, Context *context) {
  void *made = nullptr;
  DriverResult result = cuda.primary_context_retain(&made, device);
  *context = reinterpret_cast<Context>(made);
  return result;
}

DriverResult event_elapsed(float *milliseconds, void *start, void *end) {
  if (cuda.event_elapsed_v2.function != nullptr)
    return cuda.event_elapsed_v2(milliseconds, start, end);
  if (cuda.event_elapsed_v1.function != nullptr)
    return cuda.event_elapsed_v1(milliseconds, start, end);
  return not_found;
}

DriverResult shared_bytes_per_block(int device, std::size_t *bytes) {
  int shared = 0;
  const DriverResult result = cuda.device_get_attribute(&shared, shared_memory_per_block, device);
  *bytes = static_cast<std::size_t>(shared);
  return result;
}

DriverResult current_context(Context *context) {
  void *current = nullptr;
  DriverResult result = cuda.context_get_current(&current);
  *context = reinterpret_cast<Context>(current);
  return result;
}

DriverResult set_current_context(Context context) {
  return cuda.context_set_current(reinterpret_cast<void *>(context));
}

DriverResult multiprocessors(int device, int *count) {
  return cuda.device_get_attribute(count, multiprocessor_count, device);
}

constexpr int max_dynamic_shared_size_bytes = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES

DriverResult allow_shared_bytes(void *function, int bytes) {
  return cuda.function_set_attribute(function, max_dynamic_shared_size_bytes, bytes);
}

// CUtensorMapDataType, CUtensorMapSwizzle, CUtensorMapL2promotion (cuda.h).
constexpr int tensor_map_uint8 = 0, tensor_map_float16 = 6, tensor_map_bfloat16 = 9;
constexpr int tensor_map_swizzle_128b = 3, tensor_map_l2_promotion_256b = 3;
constexpr DriverResult not_supported = 801; // CUDA_ERROR_NOT_SUPPORTED

DriverResult encode_tensor_map(void *map, const TensorMapShape &shape) {
  if (cuda.tensor_map_encode_tiled.function == nullptr)
    return not_supported;
  const std::uint64_t dims[2] = {shape.columns, shape.rows};
  const std::uint64_t strides[1] = {shape.row_bytes};
  const unsigned box[2] = {shape.box_columns, shape.box_rows};
  const unsigned element_strides[2] = {1, 1};
  const int type = shape.element == TensorMapElement::bfloat16  ? tensor_map_bfloat16
                   : shape.element == TensorMapElement::float16 ? tensor_map_float16
                                                                : tensor_map_uint8;
  return cuda.tensor_map_encode_tiled(map, type, 2, const_cast<void *>(shape.base), dims, strides,
                                      box, element_strides, 0, tensor_map_swizzle_128b,
                                      tensor_map_l2_promotion_256b, 0);
}

// CUlaunchAttribute and CUlaunchConfig (cuda.h, CUDA 12.0): an attribute is an id, padding and
// a 64-byte value union, of which the cluster dimension uses the first three unsigned ints.
constexpr int launch_attribute_cluster_dimension = 4; // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, whose value is an int (1: allowed).
constexpr int launch_attribute_programmatic_serialization = 6;
struct LaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  union {
    unsigned dimension[3];
    int programmatic;
    char bytes[64];
  } value;
};
static_assert(sizeof(LaunchAttribute) == 72);
struct LaunchExConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void *stream;
  LaunchAttribute *attributes;
  unsigned attribute_count;
};

// A launch configuration with the cluster dimension as its one attribute; `attribute` must
// outlive it.
LaunchExConfig cluster_config(Dim3 grid, Dim3 block, Dim3 cluster, unsigned shared_bytes,
                              void *stream, LaunchAttribute &attribute) {
  attribute = {};
  attribute.id = launch_attribute_cluster_dimension;
  attribute.value.dimension[0] = cluster.x;
  attribute.value.dimension[1] = cluster.y;
  attribute.value.dimension[2] = cluster.z;
  return {grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream, &attribute, 1};
}

// The cluster dimension only for a cluster of more than one block (a driver may refuse the
// attribute on a GPU without clusters), then programmatic stream serialization if asked.
DriverResult launch_cluster(void *function, Dim3 grid, Dim3 block, Dim3 cluster,
                            bool overlap_previous, unsigned shared_bytes, void *stream,
                            void **params) {
  if (cuda.launch_kernel_ex.function == nullptr)
    return driver_lacks_call;
  LaunchAttribute attributes[2];
  LaunchExConfig config = cluster_config(grid, block, cluster, shared_bytes, stream, attributes[0]);
  config.attribute_count = cluster.x * cluster.y * cluster.z != 1 ? 1 : 0;
  if (overlap_previous) {
    LaunchAttribute &overlap = attributes[config.attribute_count++];
    overlap = {};
    overlap.id = launch_attribute_programmatic_serialization;
    overlap.value.programmatic = 1;
  }
  return cuda.launch_kernel_ex(&config, function, params, nullptr);
}

DriverResult max_active_clusters(int *count, void *function, Dim3 block, Dim3 cluster,
                                 unsigned shared_bytes) {
  if (cuda.occupancy_max_active_clusters.function == nullptr)
    return driver_lacks_call;
  LaunchAttribute attribute;
  // The grid only has to be a multiple of the cluster here.
  const LaunchExConfig config =
      cluster_config(cluster, block, cluster, shared_bytes, nullptr, attribute);
  return cuda.occupancy_max_active_clusters(count, function, &config);
}

} // namespace

DriverApi &cuda_driver() {
  static DriverApi api{
      .backend = Backend::cuda,
      .libraries = {"libcuda.so.1"},
      .library_label = "libcuda.so.1",
      .device_file = nullptr, // libcuda names a missing device itself (CUDA_ERROR_NO_DEVICE)
      .init = {"cuInit"},
      .device_count = {"cuDeviceGetCount"},
      .device_get = {"cuDeviceGet"},
      .device_name = {"cuDeviceGetName"},
      .module_load_data = {"cuModuleLoadData"},
      .module_get_function = {"cuModuleGetFunction"},
      .module_unload = {"cuModuleUnload"},
      .launch_kernel = {"cuLaunchKernel"},
      .function_attribute = {"cuFuncGetAttribute"},
      .allocate = {"cuMemAlloc_v2"},
      .free_memory = {"cuMemFree_v2"},
      .copy_to_device = {"cuMemcpyHtoD_v2"},
      .copy_to_host = {"cuMemcpyDtoH_v2"},
      .synchronize = {"cuCtxSynchronize"},
      .event_create = {"cuEventCreate"},
      .event_record = {"cuEventRecord"},
      .event_synchronize = {"cuEventSynchronize"},
      .event_destroy = {"cuEventDestroy_v2"},
      .fill_async = {"cuMemsetD8Async"},
      .vendor_symbols = {bind(cuda.get_error_name), bind(cuda.get_error_string),
                         bind(cuda.device_get_attribute), bind(cuda.primary_context_retain),
                         bind(cuda.context_get_current), bind(cuda.context_set_current),
                         bind(cuda.function_set_attribute),
                         bind(cuda.tensor_map_encode_tiled, /*required=*/false),
                         bind(cuda.launch_kernel_ex, false),
                         bind(cuda.occupancy_max_active_clusters, false),
                         bind(cuda.event_elapsed_v2, false), bind(cuda.event_elapsed_v1, false)},
      .describe = describe,
      .native_target = {"cuDeviceGetAttribute", native_target},
      .device_context = {"cuDevicePrimaryCtxRetain", primary_context},
      .current_context = {"cuCtxGetCurrent", current_context},
      .set_current_context = {"cuCtxSetCurrent", set_current_context},
      .multiprocessors = {"cuDeviceGetAttribute", multiprocessors},
      .allow_shared_bytes = {"cuFuncSetAttribute", allow_shared_bytes},
      .encode_tensor_map = {"cuTensorMapEncodeTiled", encode_tensor_map},
      .event_elapsed = {"cuEventElapsedTime", event_elapsed},
      .shared_bytes_per_block = {"cuDeviceGetAttribute", shared_bytes_per_block},
      .launch_cluster = {"cuLaunchKernelEx", launch_cluster},
      .max_active_clusters = {"cuOccupancyMaxActiveClusters", max_active_clusters},
      .newest_code_object_version = {"code object versions (AMD only)"}, // cubins have none
  };
  return api;
}

} // namespace kjit::detail

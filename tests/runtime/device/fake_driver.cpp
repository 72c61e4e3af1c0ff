// A fake GPU driver for the device layer's CPU tests. It exports the CUDA driver API and HIP
// symbols kjit resolves, over two "devices" whose memory is host memory and whose one kernel,
// scale(float *x, float a, int n), runs on the host. It refuses what a real driver refuses and
// a little more (a function launched, a module unloaded or memory freed while another device is
// current; a block over 1024 threads; an image that is not its own), so that the tests see kjit's
// context handling and argument packing end to end. Error numbers are the same on both vendors.
#include "fake_driver.hpp"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string_view>

using kjit::testing::FakeDriverCounters;

namespace {

constexpr int device_count = 2;
constexpr int success = 0;
constexpr int invalid_value = 1;
constexpr int invalid_image = 200;
constexpr int invalid_context = 201;
constexpr int not_found = 500;

constexpr std::string_view image_magic = "KJIT-FAKE-CODE";

FakeDriverCounters counters;
thread_local int current_device = -1; // none yet: CUDA has no context, HIP means device 0

struct FakeContext {
  int device;
} contexts[device_count] = {{0}, {1}};

struct FakeModule {
  int device;
  int scale_function; // the address of this member is the function handle
};

// Device memory: host memory after a header naming the device it belongs to.
constexpr std::size_t allocation_header = alignof(std::max_align_t);

// HIP's current device: the one set, else 0.
int hip_device() { return current_device < 0 ? 0 : current_device; }

int load(void **module, const void *image, int device) {
  if (device < 0)
    return invalid_context;
  if (std::strncmp(static_cast<const char *>(image), image_magic.data(), image_magic.size()) != 0)
    return invalid_image;
  *module = new FakeModule{device, 0};
  return success;
}

int get_function(void **function, void *module, const char *name) {
  if (std::string_view(name) != "scale")
    return not_found;
  *function = &static_cast<FakeModule *>(module)->scale_function;
  return success;
}

int unload(void *module, int device) {
  auto *loaded = static_cast<FakeModule *>(module);
  if (loaded->device != device)
    return invalid_context;
  delete loaded;
  ++counters.module_unloads;
  return success;
}

FakeModule *module_of(void *function) {
  return reinterpret_cast<FakeModule *>(static_cast<char *>(function) -
                                        offsetof(FakeModule, scale_function));
}

int launch(void *function, unsigned grid_x, unsigned block_x, unsigned block_y, unsigned block_z,
           void **params, int device) {
  if (module_of(function)->device != device)
    return invalid_context;
  if (block_x * block_y * block_z > 1024)
    return invalid_value;
  float *x = *static_cast<float **>(params[0]);
  const float a = *static_cast<float *>(params[1]);
  const int n = *static_cast<int *>(params[2]);
  const long threads = static_cast<long>(grid_x) * block_x;
  for (long i = 0; i < threads && i < n; ++i)
    x[i] *= a;
  ++counters.launches;
  return success;
}

int allocate(void **address, std::size_t bytes, int device) {
  if (device < 0)
    return invalid_context;
  auto *allocation = static_cast<unsigned char *>(std::malloc(allocation_header + bytes));
  std::memcpy(allocation, &device, sizeof device);
  *address = allocation + allocation_header;
  return success;
}

int release(void *address, int device) {
  unsigned char *allocation = static_cast<unsigned char *>(address) - allocation_header;
  int owner = 0;
  std::memcpy(&owner, allocation, sizeof owner);
  if (owner != device)
    return invalid_context;
  std::free(allocation);
  ++counters.frees;
  return success;
}

const char *error_name(int result, bool hip) {
  switch (result) {
  case success:
    return hip ? "hipSuccess" : "CUDA_SUCCESS";
  case invalid_value:
    return hip ? "hipErrorInvalidValue" : "CUDA_ERROR_INVALID_VALUE";
  case invalid_image:
    return hip ? "hipErrorInvalidImage" : "CUDA_ERROR_INVALID_IMAGE";
  case invalid_context:
    return hip ? "hipErrorInvalidContext" : "CUDA_ERROR_INVALID_CONTEXT";
  case not_found:
    return hip ? "hipErrorNotFound" : "CUDA_ERROR_NOT_FOUND";
  }
  return nullptr;
}

const char *error_text(int result) {
  switch (result) {
  case success:
    return "no error";
  case invalid_value:
    return "invalid argument";
  case invalid_image:
    return "device kernel image is invalid";
  case invalid_context:
    return "invalid device context";
  case not_found:
    return "named symbol not found";
  }
  return nullptr;
}

int device_name(char *name, int length, int device) {
  const char prefix[] = "kjit fake GPU ";
  if (device < 0 || device >= device_count || length < int(sizeof prefix) + 1)
    return invalid_value;
  std::memcpy(name, prefix, sizeof prefix - 1);
  name[sizeof prefix - 1] = static_cast<char>('0' + device);
  name[sizeof prefix] = '\0';
  return success;
}

} // namespace

extern "C" {

// Test hooks.
FakeDriverCounters *kjit_fake_counters() { return &counters; }
int kjit_fake_current_device() { return current_device; }
void kjit_fake_set_current_device(int device) { current_device = device; }

// Shared by both vendors' names below.
int fake_init(unsigned) { return success; }
int fake_device_count(int *count) {
  *count = device_count;
  return success;
}
int fake_device_get(int *device, int ordinal) {
  if (ordinal < 0 || ordinal >= device_count)
    return invalid_value;
  *device = ordinal;
  return success;
}
int fake_function_attribute(int *value, int attribute, void *) {
  *value = attribute == 4 ? 32 : 1024; // NUM_REGS, else MAX_THREADS_PER_BLOCK
  return success;
}
int fake_copy(void *destination, const void *source, std::size_t bytes) {
  std::memcpy(destination, source, bytes);
  return success;
}
int fake_synchronize() { return success; }

// CUDA.
int cuInit(unsigned flags) { return fake_init(flags); }
int cuDeviceGetCount(int *count) { return fake_device_count(count); }
int cuDeviceGet(int *device, int ordinal) { return fake_device_get(device, ordinal); }
int cuDeviceGetName(char *name, int length, int device) {
  return device_name(name, length, device);
}
int cuDeviceGetAttribute(int *value, int attribute, int device) {
  if (attribute != 75 && attribute != 76) // compute capability major, minor
    return invalid_value;
  *value = attribute == 76 ? 0 : device == 0 ? 9 : 8; // 9.0 and 8.0
  return success;
}
int cuDevicePrimaryCtxRetain(void **context, int device) {
  ++counters.primary_retain;
  *context = &contexts[device];
  return success;
}
int cuCtxGetCurrent(void **context) {
  ++counters.context_get;
  *context = current_device < 0 ? nullptr : &contexts[current_device];
  return success;
}
int cuCtxSetCurrent(void *context) {
  ++counters.context_set;
  current_device = context == nullptr ? -1 : static_cast<FakeContext *>(context)->device;
  return success;
}
int cuModuleLoadData(void **module, const void *image) {
  return load(module, image, current_device);
}
int cuModuleGetFunction(void **function, void *module, const char *name) {
  return get_function(function, module, name);
}
int cuModuleUnload(void *module) { return unload(module, current_device); }
int cuLaunchKernel(void *function, unsigned grid_x, unsigned, unsigned, unsigned block_x,
                   unsigned block_y, unsigned block_z, unsigned, void *, void **params, void **) {
  return launch(function, grid_x, block_x, block_y, block_z, params, current_device);
}
// cuda.h's CUlaunchConfig with its CUlaunchAttributes: only the cluster dimension (id 4), whose
// grid must be a multiple of it as the real driver checks, and programmatic stream serialization
// (id 6, value 1) are accepted, each at most once.
struct FakeLaunchAttribute {
  int id;
  unsigned value[17]; // the id's padding, then the 64-byte value: 72 bytes as cuda.h's
};
static_assert(sizeof(FakeLaunchAttribute) == 72);
struct FakeLaunchConfig {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  void *stream;
  FakeLaunchAttribute *attributes;
  unsigned attribute_count;
};
int cuLaunchKernelEx(const FakeLaunchConfig *config, void *function, void **params, void **) {
  const unsigned *cluster = nullptr;
  bool overlap = false;
  for (unsigned i = 0; i < config->attribute_count; ++i) {
    const FakeLaunchAttribute &attribute = config->attributes[i];
    const unsigned *value = attribute.value + 1; // after the id's padding
    if (attribute.id == 4 && cluster == nullptr)
      cluster = value;
    else if (attribute.id == 6 && !overlap && value[0] == 1)
      overlap = true;
    else
      return invalid_value;
  }
  if (cluster != nullptr && (config->grid_x % cluster[0] != 0 || config->grid_y % cluster[1] != 0 ||
                             config->grid_z % cluster[2] != 0))
    return invalid_value;
  const int result = launch(function, config->grid_x, config->block_x, config->block_y,
                            config->block_z, params, current_device);
  if (result == success && cluster != nullptr) {
    ++counters.cluster_launches;
    counters.cluster_blocks = cluster[0] * cluster[1] * cluster[2];
  }
  if (result == success && overlap)
    ++counters.overlapped_launches;
  return result;
}
int cuFuncGetAttribute(int *value, int attribute, void *function) {
  return fake_function_attribute(value, attribute, function);
}
// Resolved at open (kjit raises shared-memory limits through it); nothing here launches code that
// needs more.
int cuFuncSetAttribute(void *, int, int) { return success; }
int cuMemAlloc_v2(void **address, std::size_t bytes) {
  return allocate(address, bytes, current_device);
}
int cuMemFree_v2(void *address) { return release(address, current_device); }
int cuMemcpyHtoD_v2(void *device, const void *host, std::size_t bytes) {
  return fake_copy(device, host, bytes);
}
int cuMemcpyDtoH_v2(void *host, const void *device, std::size_t bytes) {
  return fake_copy(host, device, bytes);
}
int cuCtxSynchronize() { return current_device < 0 ? invalid_context : fake_synchronize(); }
int cuGetErrorName(int result, const char **name) {
  *name = error_name(result, false);
  return *name ? success : invalid_value;
}
int cuGetErrorString(int result, const char **text) {
  *text = error_text(result);
  return *text ? success : invalid_value;
}

// HIP.
int hipInit(unsigned flags) { return fake_init(flags); }
int hipGetDeviceCount(int *count) { return fake_device_count(count); }
int hipDeviceGet(int *device, int ordinal) { return fake_device_get(device, ordinal); }
int hipDeviceGetName(char *name, int length, int device) {
  return device_name(name, length, device);
}
// hipDeviceProp_tR0600: the name at offset 0, gcnArchName at 1160; 1472 bytes in all.
int hipGetDevicePropertiesR0600(void *properties, int device) {
  auto *bytes = static_cast<char *>(properties);
  std::memset(bytes, 0, 1472);
  device_name(bytes, 256, device);
  std::strcpy(bytes + 1160, device == 0 ? "gfx90a:sramecc+:xnack-" : "gfx942:sramecc+:xnack-");
  return success;
}
int hipGetDevice(int *device) {
  ++counters.context_get;
  *device = hip_device();
  return success;
}
int hipSetDevice(int device) {
  ++counters.context_set;
  if (device < 0 || device >= device_count)
    return invalid_value;
  current_device = device;
  return success;
}
int hipModuleLoadData(void **module, const void *image) {
  return load(module, image, hip_device());
}
int hipModuleGetFunction(void **function, void *module, const char *name) {
  return get_function(function, module, name);
}
int hipModuleUnload(void *module) { return unload(module, hip_device()); }
int hipModuleLaunchKernel(void *function, unsigned grid_x, unsigned, unsigned, unsigned block_x,
                          unsigned block_y, unsigned block_z, unsigned, void *, void **params,
                          void **) {
  return launch(function, grid_x, block_x, block_y, block_z, params, hip_device());
}
int hipFuncGetAttribute(int *value, int attribute, void *function) {
  return fake_function_attribute(value, attribute, function);
}
int hipMalloc(void **address, std::size_t bytes) { return allocate(address, bytes, hip_device()); }
int hipFree(void *address) { return release(address, hip_device()); }
int hipMemcpyHtoD(void *device, const void *host, std::size_t bytes) {
  return fake_copy(device, host, bytes);
}
int hipMemcpyDtoH(void *host, const void *device, std::size_t bytes) {
  return fake_copy(host, device, bytes);
}
int hipDeviceSynchronize() { return fake_synchronize(); }
// ROCm 6.4.3's HIP_VERSION, as Debian's libamdhip64-6 reports it.
int hipRuntimeGetVersion(int *version) {
  *version = 60443484;
  return success;
}
const char *hipGetErrorName(int result) { return error_name(result, true); }
const char *hipGetErrorString(int result) { return error_text(result); }

} // extern "C"

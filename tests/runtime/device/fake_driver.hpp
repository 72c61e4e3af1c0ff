#pragma once
// What the fake driver (fake_driver.cpp) lets a test see: how often each call was made, and the
// thread's current device as the driver holds it.
#include <atomic>

namespace kjit::testing {

struct FakeDriverCounters {
  std::atomic<int> context_get{0};         // cuCtxGetCurrent, hipGetDevice
  std::atomic<int> context_set{0};         // cuCtxSetCurrent, hipSetDevice
  std::atomic<int> primary_retain{0};      // cuDevicePrimaryCtxRetain
  std::atomic<int> launches{0};            // cuLaunchKernel, hipModuleLaunchKernel (accepted)
  std::atomic<int> cluster_launches{0};    // of them, through cuLaunchKernelEx with a cluster
  std::atomic<unsigned> cluster_blocks{0}; // the last cluster's x * y * z
  std::atomic<int> overlapped_launches{0}; // of them, with programmatic stream serialization
  std::atomic<int> module_unloads{0};      // with the module's device current
  std::atomic<int> frees{0};               // with the memory's device current
};

// Exported by the fake library with C linkage, found by the tests with dlsym.
using FakeDriverCountersFunction = FakeDriverCounters *();
using FakeDriverCurrentDeviceFunction = int(); // -1: none (CUDA without a current context)
using FakeDriverSetCurrentDeviceFunction = void(int device);

} // namespace kjit::testing

#pragma once
// Runs kjit's kernel sources on the CPU: a minimal emulation of the GPU execution model, enough
// for kernels written against the prelude that synchronise only where every thread of the block
// arrives (the row-wise and element-wise kernels): one std::thread per GPU thread of a block,
// blocks one after another, __syncthreads as a barrier, shuffles through a per-block exchange array
// between two barriers, __shared__ variables as statics (one block runs at a time). The prelude is
// taken through its HIP branch, with a host __half that rounds to nearest even as the GPU's does.
//
// Include this, then, inside an anonymous namespace (so that two files emulating different warp
// sizes do not share instantiations), the prelude and the kernel sources.
#include "kjit/ops/element.hpp"
#include "tests/support/poison.hpp" // emulated_buffer.hpp's guard band

#include <algorithm>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <thread>
#include <vector>

#define __HIP__ 1
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(...)

struct EmulatedDim3 {
  unsigned x = 1, y = 1, z = 1;
};
inline thread_local EmulatedDim3 threadIdx, blockIdx;
inline EmulatedDim3 blockDim, gridDim;

namespace kjit::emulation {

struct EmulatedLaunch {
  EmulatedDim3 grid, block;
};

inline std::barrier<> *block_barrier = nullptr;
inline std::vector<std::uint64_t> exchange; // one slot per thread of the running block

// Runs `kernel` (a callable running one thread's share) over `grid` x `block` threads, grids of
// up to three dimensions: the block's threads are started once and run the blocks in turn,
// meeting at a barrier between blocks (so a block's __shared__ statics and the exchange array are
// free for the next).
template <typename Kernel> void launch(EmulatedDim3 grid, EmulatedDim3 block, Kernel kernel) {
  gridDim = grid;
  blockDim = block;
  const unsigned threads = block.x * block.y;
  std::barrier<> barrier(threads);
  block_barrier = &barrier;
  exchange.assign(threads, 0);
  std::vector<std::thread> running;
  running.reserve(threads);
  for (unsigned y = 0; y < block.y; ++y)
    for (unsigned x = 0; x < block.x; ++x)
      running.emplace_back([=, &barrier] {
        threadIdx = {x, y, 0};
        for (unsigned bz = 0; bz < grid.z; ++bz)
          for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
              blockIdx = {bx, by, bz};
              kernel();
              barrier.arrive_and_wait();
            }
      });
  for (std::thread &thread : running)
    thread.join();
}

} // namespace kjit::emulation

inline void __syncthreads() { kjit::emulation::block_barrier->arrive_and_wait(); }

// The value of the thread whose lane is this lane xor `mask`, within groups of `width` lanes.
template <typename T> T __shfl_xor(T value, int mask, int width) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t));
  const unsigned self = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned other = self ^ static_cast<unsigned>(mask);
  std::memcpy(&kjit::emulation::exchange[self], &value, sizeof value);
  __syncthreads();
  T result = value;
  if (other / width == self / width && other < blockDim.x * blockDim.y)
    std::memcpy(&result, &kjit::emulation::exchange[other], sizeof result);
  __syncthreads();
  return result;
}

// The value of lane `lane` of this thread's group of `width` lanes.
template <typename T> T __shfl(T value, int lane, int width) {
  static_assert(sizeof(T) <= sizeof(std::uint64_t));
  const unsigned self = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned other = self / width * width + static_cast<unsigned>(lane);
  std::memcpy(&kjit::emulation::exchange[self], &value, sizeof value);
  __syncthreads();
  T result = value;
  std::memcpy(&result, &kjit::emulation::exchange[other], sizeof result);
  __syncthreads();
  return result;
}
// A wavefront's lanes run apart here: every thread of the block meets (kernels call it where
// the whole block does).
inline void __builtin_amdgcn_wave_barrier() { __syncthreads(); }
inline int atomicAdd(int *address, int value) {
  return std::atomic_ref<int>(*address).fetch_add(value);
}
using std::min;

inline float __expf(float x) { return std::exp(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __fdividef(float a, float b) { return a / b; }
// The AMD approximations the prelude's fast_exp2 and fast_reciprocal use (v_exp_f32, v_rcp_f32),
// modelled at their worst: one ulp from the float nearest the exact value, away from zero, and
// results below float's normal range flushed to zero (the ISA documents 1 ulp and allows the
// flush), so that the kernels' tolerances are checked against the error they may meet.
inline float worst_approximation(double exact) {
  const float nearest = static_cast<float>(exact);
  if (std::fabs(nearest) < 0x1p-126f)
    return 0.0f;
  return std::nextafter(nearest, std::copysign(INFINITY, nearest));
}
inline float __builtin_amdgcn_exp2f(float x) { return worst_approximation(std::exp2(double{x})); }
inline float __builtin_amdgcn_rcpf(float x) { return worst_approximation(1.0 / double{x}); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }

// IEEE binary16, converted as the GPU converts: to nearest even.
struct __half {
  std::uint16_t bits;
  __half() = default;
  explicit __half(float value) : bits(kjit::ops::from_double<kjit::ops::Half>(value).bits) {}
  explicit operator float() const {
    return static_cast<float>(kjit::ops::to_double(kjit::ops::Half{bits}));
  }
};

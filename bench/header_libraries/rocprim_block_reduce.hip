// rocPRIM's block_reduce through hiprtc: each block's sum of `in`, one item per thread.
#include <rocprim/block/block_reduce.hpp>

template <typename T, int THREADS> __global__ void block_reduce(const T *in, T *out) {
  using Reduce = rocprim::block_reduce<T, THREADS>;
  __shared__ typename Reduce::storage_type storage;
  T value = in[blockIdx.x * THREADS + threadIdx.x];
  T sum;
  Reduce().reduce(value, sum, storage);
  if (threadIdx.x == 0)
    out[blockIdx.x] = sum;
}

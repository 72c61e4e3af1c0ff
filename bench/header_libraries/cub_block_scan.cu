// CUB's BlockScan through NVRTC: each block's inclusive prefix sum of `in`, one item per thread.
#include <cub/block/block_scan.cuh>

template <typename T, int THREADS> __global__ void block_scan(const T *in, T *out) {
  using Scan = cub::BlockScan<T, THREADS>;
  __shared__ typename Scan::TempStorage temp;
  const int i = blockIdx.x * THREADS + threadIdx.x;
  T value = in[i];
  Scan(temp).InclusiveSum(value, value);
  out[i] = value;
}

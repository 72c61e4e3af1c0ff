// A library's own kernel template, prebuilt by kjit_prebuild() from kernels.json.
template <typename T, int N> __global__ void add_one(T *x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N)
    x[i] = x[i] + T(1);
}

// x[i] *= a for i < N: the smallest useful template, one element per thread.
template <typename T, int N> __global__ void scale(T *KJIT_RESTRICT x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N)
    x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
}

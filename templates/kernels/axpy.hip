// y[i] = a * x[i] + y[i] over n elements, each thread striding over ITEMS elements so that the
// compiler unrolls the inner loop.
template <typename T, int ITEMS>
__global__ void axpy(const T *KJIT_RESTRICT x, T *KJIT_RESTRICT y, float a, int n) {
  const int first = (blockIdx.x * blockDim.x + threadIdx.x) * ITEMS;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int i = first + k;
    if (i < n)
      y[i] = kjit::from_float<T>(a * kjit::to_float(x[i]) + kjit::to_float(y[i]));
  }
}

// y = a * x + b * y over N elements.
template <typename T, int N> __global__ void mylib_axpby(T *y, const T *x, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N)
    y[i] = kjit::from_float<T>(a * kjit::to_float(x[i]) + b * kjit::to_float(y[i]));
}

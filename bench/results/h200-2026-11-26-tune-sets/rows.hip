// A row-wise kernel of a library: every element of each row of HIDDEN scaled by 2, VEC elements
// per thread per step (the tunable parameter).
template <typename T, int HIDDEN, int VEC>
__global__ void scale_rows(T *out, const T *x, int rows) {
  const long row = blockIdx.x;
  if (row >= rows)
    return;
  for (int i = threadIdx.x * VEC; i < HIDDEN; i += blockDim.x * VEC)
#pragma unroll
    for (int v = 0; v < VEC; ++v)
      out[row * HIDDEN + i + v] = kjit::from_float<T>(kjit::to_float(x[row * HIDDEN + i + v]) * 2.0f);
}

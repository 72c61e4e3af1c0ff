// Root-mean-square normalisation of rows of HIDDEN elements, one thread per row (MYLIB_EPS comes
// from the template's compile options, mylib::square from its header folder).
#include "mylib/math.h"

template <typename T, int HIDDEN> __global__ void mylib_rms_norm(T *out, const T *x, int rows) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows)
    return;
  float sum = 0.0f;
  for (int i = 0; i < HIDDEN; ++i)
    sum += mylib::square(kjit::to_float(x[row * HIDDEN + i]));
  const float scale = mylib::inverse_sqrt(sum / HIDDEN + MYLIB_EPS);
  for (int i = 0; i < HIDDEN; ++i)
    out[row * HIDDEN + i] = kjit::from_float<T>(kjit::to_float(x[row * HIDDEN + i]) * scale);
}

template <typename T, int N> __global__ void add(T *x) { x[threadIdx.x] += T(N); }

// kjit/packed.h: N consecutive elements moved as one aligned load or store (up to 16 bytes), for
// the memory-bound kernels. The caller guarantees the alignment: the host checks the pointers and
// the row lengths before it picks N > 1.
#pragma once

namespace kjit {

template <typename T, int N> struct alignas(sizeof(T) * N) Packed {
  T v[N];
};

template <int N, typename T> __device__ inline Packed<T, N> load_packed(const T *from) {
  return *reinterpret_cast<const Packed<T, N> *>(from);
}

template <int N, typename T> __device__ inline void store_packed(T *to, const Packed<T, N> &value) {
  *reinterpret_cast<Packed<T, N> *>(to) = value;
}

} // namespace kjit

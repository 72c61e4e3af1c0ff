#pragma once
// Tensor maps: the descriptors through which NVIDIA's tensor memory accelerator (sm_90 and newer)
// copies tiles between global and shared memory. Made on the host by the driver
// (cuTensorMapEncodeTiled) and passed to a kernel by value, as a `const __grid_constant__`
// parameter of 128 bytes.
#include "kjit/runtime/device.hpp"

#include <cstdint>

namespace kjit {

// The driver's CUtensorMap: opaque, 128 bytes, 64-byte aligned. Kernels declare the same type
// (templates name it "kjit::TensorMap" in their argument lists).
struct alignas(64) TensorMap {
  std::uint64_t opaque[16];
};
static_assert(sizeof(TensorMap) == 128);

// 16-bit floats, or bytes (fp8: the copy engine moves them without reading them).
enum class TensorMapElement { float16, bfloat16, uint8 };

// A row-major 2-D matrix of `rows` x `columns` elements at `base`, `row_bytes` apart (a
// multiple of 16; `base` 16-byte aligned), read in boxes of `box_rows` x `box_columns` (at most
// 128 bytes of a row) that land in shared memory with the 128-byte swizzle. Reads
// past the matrix's edges fill zeros; writes there are dropped.
struct TensorMapShape {
  TensorMapElement element;
  const void *base;
  std::uint64_t rows, columns, row_bytes;
  std::uint32_t box_rows, box_columns;
};

// Throws Error(device_error) where the driver refuses the shape or the device has no tensor
// maps (AMD).
TensorMap encode_tensor_map(const Device &device, const TensorMapShape &shape);

} // namespace kjit

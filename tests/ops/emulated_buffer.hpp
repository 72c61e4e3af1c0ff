#pragma once
// Host buffers as emulated kernels (tests/ops/kernel_emulation.hpp) see them. Included inside the
// emulating file's anonymous namespace, after the prelude (for __half and bfloat16).

// The kernels' element type for each of the operators'.
template <::kjit::ops::Element T> struct KernelType { using type = float; };
template <> struct KernelType<::kjit::ops::Half> { using type = __half; };
template <> struct KernelType<::kjit::ops::BFloat16> { using type = bfloat16; };

// A host buffer as the kernel sees it, with a guard band of NaNs past the end.
template <::kjit::ops::Element T> class Buffer {
public:
  using K = typename KernelType<T>::type;
  explicit Buffer(const std::vector<T> &values) : data_(values.size() + guard) {
    std::memset(data_.data(), ::kjit::testing::poison_byte, data_.size() * sizeof(K));
    std::memcpy(data_.data(), values.data(), values.size() * sizeof(T));
  }
  static Buffer poisoned(std::size_t count) { return Buffer(std::vector<T>(), count); }
  K *data() { return data_.data(); }
  // The first `count` values, and whether the guard band past them is untouched.
  std::vector<T> values(std::size_t count) const {
    std::vector<T> out(count);
    std::memcpy(out.data(), data_.data(), count * sizeof(T));
    return out;
  }
  bool guard_intact(std::size_t count) const {
    const auto *bytes = reinterpret_cast<const unsigned char *>(data_.data());
    return std::all_of(bytes + count * sizeof(K), bytes + data_.size() * sizeof(K),
                       [](unsigned char b) { return b == ::kjit::testing::poison_byte; });
  }

private:
  static constexpr std::size_t guard = 64;
  Buffer(const std::vector<T> &, std::size_t count) : data_(count + guard) {
    std::memset(data_.data(), ::kjit::testing::poison_byte, data_.size() * sizeof(K));
  }
  std::vector<K> data_;
};

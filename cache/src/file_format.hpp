#pragma once
// The byte-level pieces kjit's two file formats share (entry.hpp, archive.hpp): little-endian
// integers and the XXH3-128 checksum that ends each file.
#include <array>
#include <cstddef>
#include <span>
#include <vector>
#include <xxhash.h>

namespace kjit::cache::format {

inline constexpr std::size_t checksum_size = 16;
using Checksum = std::array<std::byte, checksum_size>;

// Writes `value` little-endian at `at`; returns the position after it.
template <class Unsigned> std::byte *store_le(std::byte *at, Unsigned value) {
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i)
    *at++ = static_cast<std::byte>(value >> (8 * i));
  return at;
}

// Appends `value` little-endian to `out`.
template <class Unsigned> void append_le(std::vector<std::byte> &out, Unsigned value) {
  out.resize(out.size() + sizeof(Unsigned));
  store_le(out.data() + out.size() - sizeof(Unsigned), value);
}

template <class Unsigned> Unsigned load_le(const std::byte *bytes) {
  Unsigned value = 0;
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i)
    value |= static_cast<Unsigned>(std::to_integer<unsigned>(bytes[i])) << (8 * i);
  return value;
}

// The XXH3-128 of `covered` in its on-disk order: high 64 bits, then low, each little-endian.
inline Checksum checksum_of(std::span<const std::byte> covered) {
  const XXH128_hash_t hash = XXH3_128bits(covered.data(), covered.size());
  Checksum bytes;
  store_le(store_le(bytes.data(), hash.high64), hash.low64);
  return bytes;
}

} // namespace kjit::cache::format

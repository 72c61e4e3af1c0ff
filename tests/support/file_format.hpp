#pragma once
// The byte-level framing of kjit's files (entries and archives: docs/ARCHITECTURE.md), written
// out independently of cache/ so that tests can build and alter files the way another writer, an
// older kjit or a disk would: little-endian integers, and the XXH3-128 checksum that ends each
// file (high 64 bits, then low).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>
#include <xxhash.h>

namespace kjit::testing {

inline constexpr std::size_t checksum_size = 16;

// Writes the low `size` bytes of `value` little-endian at `at`.
inline void store_le(std::byte *at, std::uint64_t value, std::size_t size) {
  for (std::size_t i = 0; i < size; ++i)
    at[i] = static_cast<std::byte>(value >> (8 * i));
}

// Appends the low `size` bytes of `value` little-endian.
inline void append_le(std::vector<std::byte> &out, std::uint64_t value, std::size_t size) {
  out.resize(out.size() + size);
  store_le(out.data() + out.size() - size, value, size);
}

// The `size`-byte little-endian integer at `at`.
inline std::uint64_t load_le(const std::byte *at, std::size_t size) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < size; ++i)
    value |= std::uint64_t(std::to_integer<unsigned>(at[i])) << (8 * i);
  return value;
}

// Appends the checksum of everything `out` holds.
inline void append_checksum(std::vector<std::byte> &out) {
  const XXH128_hash_t hash = XXH3_128bits(out.data(), out.size());
  append_le(out, hash.high64, 8);
  append_le(out, hash.low64, 8);
}

// `bytes` with its last checksum_size bytes replaced by the checksum of the rest: whatever the
// rest holds, a reader gets past the checksum to it. Shorter inputs are returned as they are.
inline std::vector<std::byte> sealed(std::span<const std::byte> bytes) {
  std::vector<std::byte> out(bytes.begin(), bytes.end());
  if (out.size() < checksum_size)
    return out;
  out.resize(out.size() - checksum_size);
  append_checksum(out);
  return out;
}

} // namespace kjit::testing

#pragma once
// The byte-level pieces kjit's two file formats share (entry.hpp, archive.hpp): little-endian
// integers and the XXH3-128 checksum that ends each file.
#include <array>
#include <cstddef>
#include <memory>
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

// An XXH3-128 in its on-disk order: high 64 bits, then low, each little-endian.
inline Checksum checksum_bytes(XXH128_hash_t hash) {
  Checksum bytes;
  store_le(store_le(bytes.data(), hash.high64), hash.low64);
  return bytes;
}

// The checksum of `covered`.
inline Checksum checksum_of(std::span<const std::byte> covered) {
  return checksum_bytes(XXH3_128bits(covered.data(), covered.size()));
}

// checksum_of for bytes that come in pieces (an archive streamed to or from its file).
class ChecksumStream {
public:
  ChecksumStream() { XXH3_128bits_reset(state_.get()); }
  void update(std::span<const std::byte> bytes) {
    XXH3_128bits_update(state_.get(), bytes.data(), bytes.size());
  }
  Checksum digest() const { return checksum_bytes(XXH3_128bits_digest(state_.get())); }

private:
  struct Free {
    void operator()(XXH3_state_t *state) const { XXH3_freeState(state); }
  };
  std::unique_ptr<XXH3_state_t, Free> state_{XXH3_createState()};
};

} // namespace kjit::cache::format

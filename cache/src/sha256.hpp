#pragma once
// SHA-256 (FIPS 180-4), incremental. kjit's own rather than OpenSSL's: OpenSSL 3 initialises its
// providers and reads its configuration on the first digest, a cost every fresh process would pay
// before its first cache hit, for a function of a hundred lines (BENCHMARKS.md, "Evidence behind
// the code's choices").
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>

namespace kjit::cache {

class Sha256 {
public:
  using Digest = std::array<std::uint8_t, 32>;

  Sha256();
  void update(std::string_view bytes);
  // The digest of everything updated so far; the object is spent after.
  Digest finish();

private:
  void compress(const std::uint8_t *block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// HMAC-SHA256 (RFC 2104): what signs the values of a shared store with a fleet secret. The
// message is `message`, or the concatenation of `parts` (so a large value is never copied into
// one string).
Sha256::Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts);
inline Sha256::Digest hmac_sha256(std::string_view key, std::string_view message) {
  return hmac_sha256(key, {message});
}

} // namespace kjit::cache

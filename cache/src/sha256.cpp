#include "sha256.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

namespace kjit::cache {

namespace {

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes.
constexpr std::uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

std::uint32_t load_big_endian(const std::uint8_t *bytes) {
  return std::uint32_t{bytes[0]} << 24 | std::uint32_t{bytes[1]} << 16 |
         std::uint32_t{bytes[2]} << 8 | std::uint32_t{bytes[3]};
}

} // namespace

// The first 32 bits of the fractional parts of the square roots of the first 8 primes.
Sha256::Sha256()
    : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
             0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::compress(const std::uint8_t *block) {
  std::uint32_t schedule[64];
  for (int i = 0; i < 16; ++i)
    schedule[i] = load_big_endian(block + std::size_t{4} * i);
  for (int i = 16; i < 64; ++i) {
    const std::uint32_t s0 =
        std::rotr(schedule[i - 15], 7) ^ std::rotr(schedule[i - 15], 18) ^ (schedule[i - 15] >> 3);
    const std::uint32_t s1 =
        std::rotr(schedule[i - 2], 17) ^ std::rotr(schedule[i - 2], 19) ^ (schedule[i - 2] >> 10);
    schedule[i] = schedule[i - 16] + s0 + schedule[i - 7] + s1;
  }
  auto [a, b, c, d, e, f, g, h] = state_;
  for (int i = 0; i < 64; ++i) {
    const std::uint32_t sum1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
    const std::uint32_t choice = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + sum1 + choice + round_constants[i] + schedule[i];
    const std::uint32_t sum0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
    const std::uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = sum0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const std::uint32_t results[8] = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i)
    state_[i] += results[i];
}

void Sha256::update(std::string_view bytes) {
  const auto *data = reinterpret_cast<const std::uint8_t *>(bytes.data());
  std::size_t size = bytes.size();
  total_bytes_ += size;
  if (buffered_ > 0) {
    const std::size_t taken = std::min(size, buffer_.size() - buffered_);
    std::memcpy(buffer_.data() + buffered_, data, taken);
    buffered_ += taken;
    data += taken;
    size -= taken;
    if (buffered_ < buffer_.size())
      return;
    compress(buffer_.data());
    buffered_ = 0;
  }
  for (; size >= buffer_.size(); data += buffer_.size(), size -= buffer_.size())
    compress(data);
  std::memcpy(buffer_.data(), data, size);
  buffered_ = size;
}

Sha256::Digest Sha256::finish() {
  // Padding: a 1 bit, zeros up to 56 bytes mod 64, then the message length in bits, big-endian.
  const std::uint64_t total_bits = total_bytes_ * 8;
  const std::uint8_t one = 0x80;
  update({reinterpret_cast<const char *>(&one), 1});
  const std::uint8_t zeros[64] = {};
  const std::size_t zero_count = (buffered_ <= 56 ? 56 : 120) - buffered_;
  update({reinterpret_cast<const char *>(zeros), zero_count});
  std::uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<std::uint8_t>(total_bits >> (56 - 8 * i));
  update({reinterpret_cast<const char *>(length), 8});

  Digest digest;
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      digest[4 * i + j] = static_cast<std::uint8_t>(state_[i] >> (24 - 8 * j));
  return digest;
}

Sha256::Digest hmac_sha256(std::string_view key, std::initializer_list<std::string_view> parts) {
  constexpr std::size_t block = 64;
  // A key longer than a block is hashed first; a shorter one is padded with zeros.
  std::array<std::uint8_t, block> padded{};
  if (key.size() > block) {
    Sha256 hashed;
    hashed.update(key);
    const Sha256::Digest digest = hashed.finish();
    std::copy(digest.begin(), digest.end(), padded.begin());
  } else {
    std::copy(key.begin(), key.end(), padded.begin());
  }
  auto keyed = [&](std::uint8_t pad) {
    std::array<char, block> out;
    for (std::size_t i = 0; i < block; ++i)
      out[i] = static_cast<char>(padded[i] ^ pad);
    Sha256 sha;
    sha.update({out.data(), out.size()});
    return sha;
  };
  Sha256 inner = keyed(0x36);
  for (std::string_view part : parts)
    inner.update(part);
  const Sha256::Digest inner_digest = inner.finish();
  Sha256 outer = keyed(0x5c);
  outer.update({reinterpret_cast<const char *>(inner_digest.data()), inner_digest.size()});
  return outer.finish();
}

} // namespace kjit::cache

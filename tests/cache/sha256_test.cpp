// kjit's SHA-256 against the FIPS 180-4 example vectors (NIST CSRC "Examples with Intermediate
// Values"), and incremental updates split at every offset against the one-shot digest.
#include "cache/src/sha256.hpp"
#include "kjit/cache/key.hpp"

#include <gtest/gtest.h>
#include <string>

namespace kjit::cache {
namespace {

TEST(Sha256, MatchesTheStandardsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmno"
                 "pqklmnopqrlmnopqrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalUpdatesAtAnySplitGiveTheSameDigest) {
  std::string message;
  for (int i = 0; i < 200; ++i)
    message += static_cast<char>(i * 7 + 3);
  const std::string whole = sha256_hex(message);
  for (std::size_t split = 0; split <= message.size(); ++split) {
    Sha256 sha;
    sha.update(std::string_view(message).substr(0, split));
    sha.update(std::string_view(message).substr(split));
    const Sha256::Digest digest = sha.finish();
    std::string hex;
    for (std::uint8_t byte : digest) {
      char pair[3];
      std::snprintf(pair, sizeof pair, "%02x", byte);
      hex += pair;
    }
    ASSERT_EQ(hex, whole) << "split at " << split;
  }
}

} // namespace
} // namespace kjit::cache

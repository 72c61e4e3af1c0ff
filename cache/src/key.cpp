#include "kjit/cache/key.hpp"

#include "kjit/cache/entry.hpp"
#include "kjit/error.hpp"

#include <openssl/evp.h>

#include <charconv>
#include <memory>
#include <span>

namespace kjit::cache {

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

// An incremental SHA-256, so that key_of hashes the fields in place instead of concatenating them.
class Sha256 {
public:
  Sha256() : context_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!context_ || EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
      fail();
  }

  void update(std::string_view bytes) {
    if (EVP_DigestUpdate(context_.get(), bytes.data(), bytes.size()) != 1)
      fail();
  }

  // One string of the key serialisation: its length in decimal, ':', then the string.
  void update_length_prefixed(std::string_view text) {
    char prefix[24];
    char *end = std::to_chars(prefix, prefix + sizeof prefix - 1, text.size()).ptr;
    *end++ = ':';
    update({prefix, static_cast<std::size_t>(end - prefix)});
    update(text);
  }

  std::array<std::uint8_t, 32> finish() {
    std::array<std::uint8_t, 32> digest{};
    unsigned int length = 0;
    if (EVP_DigestFinal_ex(context_.get(), digest.data(), &length) != 1 || length != digest.size())
      fail();
    return digest;
  }

private:
  // OpenSSL only fails here when it cannot allocate or its provider is broken.
  [[noreturn]] static void fail() { throw Error(Errc::cache_io, "SHA-256 failed in OpenSSL"); }

  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

std::string to_hex(std::span<const std::uint8_t> bytes) {
  std::string hex(bytes.size() * 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    hex[2 * i] = kHexDigits[bytes[i] >> 4];
    hex[2 * i + 1] = kHexDigits[bytes[i] & 0xF];
  }
  return hex;
}

} // namespace

std::string Key::hex() const { return to_hex(digest); }

std::optional<Key> Key::from_hex(std::string_view hex) {
  Key key;
  if (hex.size() != key.digest.size() * 2)
    return std::nullopt;
  for (std::size_t i = 0; i < key.digest.size(); ++i) {
    int high = hex_value(hex[2 * i]);
    int low = hex_value(hex[2 * i + 1]);
    if (high < 0 || low < 0)
      return std::nullopt;
    key.digest[i] = static_cast<std::uint8_t>(high << 4 | low);
  }
  return key;
}

KeyBuilder::KeyBuilder() { add("format", std::to_string(kEntryFormatVersion)); }

KeyBuilder &KeyBuilder::add(std::string name, std::string value) {
  fields_.emplace_back(std::move(name), std::move(value));
  return *this;
}

Key KeyBuilder::finish() const { return key_of(fields_); }

Key key_of(const std::vector<KeyField> &fields) {
  Sha256 sha;
  for (const auto &[name, value] : fields) {
    sha.update_length_prefixed(name);
    sha.update_length_prefixed(value);
    sha.update("\n");
  }
  return Key{sha.finish()};
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 sha;
  sha.update(bytes);
  return to_hex(sha.finish());
}

} // namespace kjit::cache

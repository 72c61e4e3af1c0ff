#include "kjit/cache/key.hpp"

#include "kjit/cache/entry.hpp"
#include "sha256.hpp"

#include <charconv>
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

// One string of the key serialisation: its length in decimal, ':', then the string.
void update_length_prefixed(Sha256 &sha, std::string_view text) {
  char prefix[24];
  char *end = std::to_chars(prefix, prefix + sizeof prefix - 1, text.size()).ptr;
  *end++ = ':';
  sha.update({prefix, static_cast<std::size_t>(end - prefix)});
  sha.update(text);
}

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
    update_length_prefixed(sha, name);
    update_length_prefixed(sha, value);
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

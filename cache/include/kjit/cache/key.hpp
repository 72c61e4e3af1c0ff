#pragma once
// The cache key: SHA-256 over every input that can change the code object, serialised
// canonically, in the order given. Each field (name, value) contributes
//
//   <decimal length of name> ':' <name> <decimal length of value> ':' <value> '\n'
//
// e.g. ("format", "1") -> "6:format1:1\n". Lengths are written without leading zeros and each
// string is read back by its length, so the byte stream parses into exactly one field list: the
// serialisation is injective and ("a", "bc") never collides with ("ab", "c"). Changing it changes
// every key, so it is pinned by a golden value in tests/cache/key_test.cpp.
#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kjit::cache {

struct Key {
  std::array<std::uint8_t, 32> digest{};

  std::string hex() const; // 64 lowercase hex digits
  // Accepts exactly 64 hex digits (either case); nullopt otherwise.
  static std::optional<Key> from_hex(std::string_view hex);
  auto operator<=>(const Key &) const = default;
};

// One named key input, as hashed. Kept in the entry header so `kjit cache show` can say what
// went into a key and `verify` can recompute it.
using KeyField = std::pair<std::string, std::string>;

class KeyBuilder {
public:
  // Starts with the entry format version, so a format change never reuses an old key.
  KeyBuilder();
  KeyBuilder &add(std::string name, std::string value);
  const std::vector<KeyField> &fields() const { return fields_; }
  Key finish() const;

private:
  std::vector<KeyField> fields_;
};

// Recomputes the key of an ordered field list (what KeyBuilder::finish does).
Key key_of(const std::vector<KeyField> &fields);

// SHA-256 of arbitrary bytes as 64 hex digits: used for source and header digests.
std::string sha256_hex(std::string_view bytes);

} // namespace kjit::cache

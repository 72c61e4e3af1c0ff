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

// What a key input stands for, from its field name (runtime/src/variant.cpp names them): what
// `kjit cache explain` says differs between the key a lookup uses and an entry's. A field name
// this kjit does not know (one a newer kjit records) is `other`.
enum class KeyInputKind {
  format,        // "format": the entry format version
  template_name, // "template"
  source,        // "source": the SHA-256 of the template's source
  header,        // "header:NAME": the SHA-256 of a header the compiler is given (the prelude too)
  pre_include,   // "pre-include"
  expression,    // "expression": the kernel's name expression
  parameter,     // "param:NAME"
  option,        // "option": one canonical compile option
  target,        // "target"
  compiler,      // "compiler": the compiler build's identity (library, version, build ids)
  environment,   // "env:NAME": a variable that changes the compiler's output
  other,
};
// The one place a field name is classified: a new key input names its kind here.
KeyInputKind key_input_kind(std::string_view field_name);
// "source", "header", "parameter", "option", "compiler build", "compiler environment", ...
std::string_view to_string(KeyInputKind kind);

// One key input that differs between two field lists. A field both hold once with different
// values is one difference with both values; otherwise each value only one side holds (an option
// added, a header removed) is one difference with the other side empty.
struct KeyDifference {
  KeyInputKind kind = KeyInputKind::other;
  std::string name;                  // the field's name: "param:N", "header:kjit/prelude.h"
  std::optional<std::string> wanted; // the value in the key looked up; nullopt: it has none
  std::optional<std::string> found;  // the value in the entry's; nullopt: it has none
  bool operator==(const KeyDifference &) const = default;
};
// What differs between `wanted` (the key a lookup uses) and `found` (an entry's key inputs), in
// the order of `wanted`'s fields, then the fields only `found` has. A name expression that differs
// along with a parameter is left out: the parameters make it. Empty when the lists hold the same
// fields with the same values (their keys are equal).
std::vector<KeyDifference> diff_key_inputs(const std::vector<KeyField> &wanted,
                                           const std::vector<KeyField> &found);

} // namespace kjit::cache

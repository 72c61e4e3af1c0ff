#include "kjit/cache/entry.hpp"

#include "file_format.hpp"
#include "kjit/error.hpp"

#include <nlohmann/json.hpp>
#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace kjit::cache {

namespace {

using Json = nlohmann::ordered_json; // ordered: the header reads key, target, template... on disk
using StringPairs = std::vector<std::pair<std::string, std::string>>;

constexpr std::array<char, 8> kMagic = {'K', 'J', 'I', 'T', 'E', 'N', 'T', '\0'};
constexpr std::size_t kPreludeSize = kEntryPreludeSize; // magic, version, both lengths
constexpr std::size_t kChecksumSize = format::checksum_size;
constexpr std::size_t kSmallestEntry = kPreludeSize + kChecksumSize;

std::byte *store_bytes(std::byte *at, const void *bytes, std::size_t size) {
  if (size != 0) // memcpy's pointers must be valid even for no bytes; an empty vector's may not be
    std::memcpy(at, bytes, size);
  return at + size;
}

Json parameters_json(const std::vector<EntryParameter> &parameters) {
  Json array = Json::array();
  for (const EntryParameter &parameter : parameters)
    std::visit(
        [&](const auto &value) {
          array.push_back(Json::array({parameter.name, value}));
        },
        parameter.value);
  return array;
}

std::string header_json(const EntryHeader &header) {
  Json json = {
      {"key", header.key.hex()},          {"target", header.target},
      {"template", header.template_name}, {"parameters", parameters_json(header.parameters)},
      {"key_inputs", header.key_inputs},  {"kernels", header.kernels},
      {"compiler", header.compiler},      {"created_unix", header.created_unix},
      {"compile_ms", header.compile_ms},
  };
  try {
    // Strict UTF-8: replacing bytes would make key_inputs differ from what was hashed.
    return json.dump();
  } catch (const Json::exception &error) {
    throw Error(Errc::cache_io,
                "cannot encode cache entry header for " + header.key.hex() + ": " + error.what());
  }
}

// What is wrong with a header that parses as JSON but is not an EntryHeader.
struct BadHeader : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Headers are read with RapidJSON rather than nlohmann::json, which writes them: every disk hit
// and every row of `kjit cache ls` parses one, and nlohmann's ordered DOM was most of a listing's
// time (BENCHMARKS.md, "Evidence behind the code's choices"). The iterative parser keeps a
// hostile header's nesting off the stack, and encoding validation refuses what is not UTF-8.
using Document = rapidjson::Document;
using Value = rapidjson::Value;

std::string view_of(const Value &string) { return {string.GetString(), string.GetStringLength()}; }

const Value &field(const Value &object, const char *name) {
  auto found = object.FindMember(name);
  if (found == object.MemberEnd())
    throw BadHeader(std::string("missing field '") + name + "'");
  return found->value;
}

std::string string_field(const Value &object, const char *name) {
  const Value &value = field(object, name);
  if (!value.IsString())
    throw BadHeader(std::string("field '") + name + "' is not a string");
  return view_of(value);
}

StringPairs string_pairs_field(const Value &object, const char *name) {
  const Value &value = field(object, name);
  auto is_string_pair = [](const Value &pair) {
    return pair.IsArray() && pair.Size() == 2 && pair[0].IsString() && pair[1].IsString();
  };
  const auto bad = [name] {
    return BadHeader(std::string("field '") + name + "' is not a list of [string, string] pairs");
  };
  if (!value.IsArray())
    throw bad();
  StringPairs pairs;
  pairs.reserve(value.Size());
  for (const Value &pair : value.GetArray()) {
    if (!is_string_pair(pair))
      throw bad();
    pairs.emplace_back(view_of(pair[0]), view_of(pair[1]));
  }
  return pairs;
}

std::vector<EntryParameter> parameters_field(const Value &object, const char *name) {
  const Value &value = field(object, name);
  const auto bad = [name] {
    return BadHeader(std::string("field '") + name +
                     "' is not a list of [name, type or integer] pairs");
  };
  if (!value.IsArray())
    throw bad();
  std::vector<EntryParameter> parameters;
  parameters.reserve(value.Size());
  for (const Value &pair : value.GetArray()) {
    if (!pair.IsArray() || pair.Size() != 2 || !pair[0].IsString())
      throw bad();
    if (pair[1].IsString())
      parameters.push_back({view_of(pair[0]), view_of(pair[1])});
    else if (pair[1].IsInt64())
      parameters.push_back({view_of(pair[0]), pair[1].GetInt64()});
    else
      throw bad();
  }
  return parameters;
}

std::int64_t integer_field(const Value &object, const char *name) {
  const Value &value = field(object, name);
  if (!value.IsInt64())
    throw BadHeader(std::string("field '") + name + "' is not a 64-bit integer");
  return value.GetInt64();
}

double number_field(const Value &object, const char *name) {
  const Value &value = field(object, name);
  if (!value.IsNumber())
    throw BadHeader(std::string("field '") + name + "' is not a number");
  return value.GetDouble();
}

// Throws BadHeader; decode_entry turns it into a problem.
EntryHeader parse_header(std::string_view text) {
  Document json;
  json.Parse<rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag>(text.data(),
                                                                                     text.size());
  if (json.HasParseError())
    throw BadHeader(std::string("not valid JSON: ") +
                    rapidjson::GetParseError_En(json.GetParseError()) + " at byte " +
                    std::to_string(json.GetErrorOffset()));
  if (!json.IsObject())
    throw BadHeader("not a JSON object");
  EntryHeader header;
  std::optional<Key> key = Key::from_hex(string_field(json, "key"));
  if (!key)
    throw BadHeader("field 'key' is not 64 hex digits");
  header.key = *key;
  header.target = string_field(json, "target");
  header.template_name = string_field(json, "template");
  header.parameters = parameters_field(json, "parameters");
  header.key_inputs = string_pairs_field(json, "key_inputs");
  header.kernels = string_pairs_field(json, "kernels");
  header.compiler = string_field(json, "compiler");
  header.created_unix = integer_field(json, "created_unix");
  header.compile_ms = number_field(json, "compile_ms");
  return header;
}

Decoded rejected(std::string problem) { return Decoded{std::nullopt, std::move(problem)}; }

} // namespace

std::string EntryParameter::value_text() const {
  if (const std::int64_t *integer = std::get_if<std::int64_t>(&value))
    return std::to_string(*integer);
  return std::get<std::string>(value);
}

std::vector<std::byte> encode_entry(const Entry &entry) {
  std::string header = header_json(entry.header);
  if (header.size() > std::numeric_limits<std::uint32_t>::max())
    throw Error(Errc::cache_io, "cannot encode cache entry " + entry.header.key.hex() +
                                    ": header is larger than 4 GiB");
  std::vector<std::byte> out(kSmallestEntry + header.size() + entry.code.size());
  std::byte *at = store_bytes(out.data(), kMagic.data(), kMagic.size());
  at = format::store_le<std::uint32_t>(at, kEntryFormatVersion);
  at = format::store_le<std::uint32_t>(at, static_cast<std::uint32_t>(header.size()));
  at = format::store_le<std::uint64_t>(at, entry.code.size());
  at = store_bytes(at, header.data(), header.size());
  at = store_bytes(at, entry.code.data(), entry.code.size());
  const format::Checksum checksum =
      format::checksum_of(std::span(out).first(out.size() - kChecksumSize));
  std::copy(checksum.begin(), checksum.end(), at);
  return out;
}

namespace {

// What is wrong with the magic and version at the start of `bytes` (at least `smallest` long
// for a whole entry), or "".
std::string prelude_problem(std::span<const std::byte> bytes, std::size_t smallest) {
  const std::size_t size = bytes.size();
  // The magic is checked on what is there, so a short foreign file reads as "bad magic".
  auto magic_bytes = bytes.first(std::min(size, kMagic.size()));
  if (!std::equal(magic_bytes.begin(), magic_bytes.end(), kMagic.begin(),
                  [](std::byte byte, char expected) { return byte == std::byte(expected); }))
    return "bad magic";
  if (size < smallest)
    return "truncated: " + std::to_string(size) + " bytes, the smallest entry is " +
           std::to_string(kSmallestEntry);
  auto version = format::load_le<std::uint32_t>(bytes.data() + 8);
  if (version != kEntryFormatVersion)
    return "format version " + std::to_string(version) + ", this kjit reads " +
           std::to_string(kEntryFormatVersion);
  return {};
}

} // namespace

std::optional<EntryHeader> decode_header(std::span<const std::byte> prefix, std::string &problem,
                                         std::size_t *needed_bytes) {
  problem = prelude_problem(prefix, kPreludeSize);
  if (!problem.empty())
    return std::nullopt;
  const std::size_t needed = kPreludeSize + format::load_le<std::uint32_t>(prefix.data() + 12);
  if (needed_bytes != nullptr)
    *needed_bytes = needed;
  if (prefix.size() < needed) {
    problem = "truncated: " + std::to_string(prefix.size()) + " bytes, the header ends at " +
              std::to_string(needed);
    return std::nullopt;
  }
  try {
    const char *text = reinterpret_cast<const char *>(prefix.data() + kPreludeSize);
    return parse_header({text, needed - kPreludeSize});
  } catch (const std::exception &error) { // BadHeader, or out of memory
    problem = std::string("header: ") + error.what();
    return std::nullopt;
  }
}

Decoded decode_entry(std::span<const std::byte> bytes) {
  const std::size_t size = bytes.size();
  if (std::string problem = prelude_problem(bytes, kSmallestEntry); !problem.empty())
    return rejected(std::move(problem));

  // Both lengths are untrusted: compare them with the room there is, never add them blindly.
  std::uint64_t header_length = format::load_le<std::uint32_t>(bytes.data() + 12);
  std::uint64_t code_length = format::load_le<std::uint64_t>(bytes.data() + 16);
  const std::uint64_t room = size - kSmallestEntry;
  if (header_length > room || code_length > room - header_length) {
    if (code_length > std::numeric_limits<std::uint64_t>::max() - kSmallestEntry - header_length)
      return rejected("truncated: " + std::to_string(size) +
                      " bytes, header says more than 2^64 (code length " +
                      std::to_string(code_length) + ")");
    return rejected("truncated: " + std::to_string(size) + " bytes, header says " +
                    std::to_string(kSmallestEntry + header_length + code_length));
  }
  if (header_length + code_length != room)
    return rejected("trailing bytes: " + std::to_string(size) + " bytes, header says " +
                    std::to_string(kSmallestEntry + header_length + code_length));

  const format::Checksum checksum = format::checksum_of(bytes.first(size - kChecksumSize));
  if (std::memcmp(checksum.data(), bytes.data() + size - kChecksumSize, kChecksumSize) != 0)
    return rejected("checksum mismatch");

  Entry entry;
  try {
    const char *header_text = reinterpret_cast<const char *>(bytes.data() + kPreludeSize);
    entry.header = parse_header({header_text, header_length});
  } catch (const std::exception &error) { // BadHeader, or out of memory
    return rejected(std::string("header: ") + error.what());
  }
  auto code = bytes.subspan(kPreludeSize + header_length, code_length);
  entry.code.assign(code.begin(), code.end());
  return Decoded{std::move(entry), {}};
}

Decoded decode_entry_for(std::span<const std::byte> bytes, const Key &key,
                         std::string_view target) {
  Decoded decoded = decode_entry(bytes);
  if (!decoded.entry)
    return decoded;
  const EntryHeader &header = decoded.entry->header;
  if (header.key != key)
    return {std::nullopt, "entry holds key " + header.key.hex() + ", expected " + key.hex()};
  if (header.target != target)
    return {std::nullopt, "entry is for " + header.target + ", expected " + std::string(target)};
  return decoded;
}

} // namespace kjit::cache

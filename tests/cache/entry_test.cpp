#include "tests/support/sample_entries.hpp"

#include "kjit/error.hpp"
#include "tests/support/file_format.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <limits>
#include <random>
#include <span>

namespace kjit::cache {
namespace {

using testing::sample_entry;
using Json = nlohmann::ordered_json; // keeps the order on disk, so dump() gives it back

using kjit::testing::append_checksum;
using kjit::testing::append_le;

// The layout of entry.hpp written out independently of entry.cpp, so that tests can build entries
// with a valid checksum around any header and lengths.
std::vector<std::byte> prelude(std::uint32_t version, std::uint64_t header_length,
                               std::uint64_t code_length) {
  std::vector<std::byte> out;
  for (char c : std::string_view("KJITENT\0", 8))
    out.push_back(static_cast<std::byte>(c));
  append_le(out, version, 4);
  append_le(out, header_length, 4);
  append_le(out, code_length, 8);
  return out;
}

std::vector<std::byte> assemble(const std::string &header, std::span<const std::byte> code,
                                std::uint32_t version = kEntryFormatVersion) {
  std::vector<std::byte> out = prelude(version, header.size(), code.size());
  for (char c : header)
    out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), code.begin(), code.end());
  append_checksum(out);
  return out;
}

std::string problem_of(std::span<const std::byte> bytes) {
  Decoded decoded = decode_entry(bytes);
  EXPECT_EQ(decoded.entry.has_value(), decoded.problem.empty());
  return decoded.entry ? "" : decoded.problem;
}

Json header_of(const std::vector<std::byte> &encoded) {
  std::uint32_t header_length = 0;
  std::memcpy(&header_length, encoded.data() + 12, 4); // this test runs little-endian only
  const auto *text = reinterpret_cast<const char *>(encoded.data() + 24);
  return Json::parse(text, text + header_length);
}

TEST(Entry, RoundTrips) {
  Entry entry = sample_entry("round trip");
  Decoded decoded = decode_entry(encode_entry(entry));
  ASSERT_TRUE(decoded.entry) << decoded.problem;
  EXPECT_EQ(*decoded.entry, entry);
  EXPECT_TRUE(decoded.problem.empty());
}

TEST(Entry, RoundTripsEmptyAndUnusualValues) {
  Entry empty;
  Decoded decoded = decode_entry(encode_entry(empty));
  ASSERT_TRUE(decoded.entry) << decoded.problem;
  EXPECT_EQ(*decoded.entry, empty);

  Entry unusual = sample_entry("unusual", "sm_90a", 0);
  unusual.header.key_inputs.emplace_back("quote\"back\\slash", "tab\tnewline\n\u00b5 \x01");
  unusual.header.created_unix = std::numeric_limits<std::int64_t>::min();
  unusual.header.compile_ms = 0.1 + 0.2; // not exactly representable in decimal
  decoded = decode_entry(encode_entry(unusual));
  ASSERT_TRUE(decoded.entry) << decoded.problem;
  EXPECT_EQ(*decoded.entry, unusual);
}

TEST(Entry, LayoutIsTheDocumentedOne) {
  Entry entry = sample_entry("layout");
  std::vector<std::byte> encoded = encode_entry(entry);
  Json header = header_of(encoded);
  std::string header_text = header.dump();
  EXPECT_EQ(encoded, assemble(header_text, entry.code));

  EXPECT_EQ(header["key"], entry.header.key.hex());
  EXPECT_EQ(header["target"], entry.header.target);
  EXPECT_EQ(header["template"], entry.header.template_name);
  EXPECT_EQ(header["parameters"], Json::parse(R"([["T", "float"], ["N", 256]])"));
  EXPECT_EQ(header["key_inputs"][1], Json::array({"template", "scale"}));
  EXPECT_EQ(header["kernels"][0][1], entry.header.kernels[0].second);
  EXPECT_EQ(header["compiler"], entry.header.compiler);
  EXPECT_EQ(header["created_unix"], entry.header.created_unix);
  EXPECT_EQ(header["compile_ms"], entry.header.compile_ms);
}

TEST(Entry, EveryByteFlipIsDetected) {
  const std::vector<std::byte> encoded = encode_entry(sample_entry("flips"));
  for (std::size_t position = 0; position < encoded.size(); ++position) {
    for (std::byte mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xFF}}) {
      std::vector<std::byte> flipped = encoded;
      flipped[position] ^= mask;
      EXPECT_NE(problem_of(flipped), "") << "byte " << position;
    }
  }
}

TEST(Entry, EveryTruncationIsDetected) {
  const std::vector<std::byte> encoded = encode_entry(sample_entry("truncations"));
  for (std::size_t length = 0; length < encoded.size(); ++length)
    EXPECT_EQ(problem_of(std::span(encoded).first(length)).rfind("truncated: ", 0), 0u)
        << length << " bytes";
  EXPECT_EQ(problem_of(std::span(encoded).first(100)),
            "truncated: 100 bytes, header says " + std::to_string(encoded.size()));
}

TEST(Entry, TrailingBytesAreDetected) {
  std::vector<std::byte> encoded = encode_entry(sample_entry("trailing"));
  encoded.push_back(std::byte{0});
  EXPECT_EQ(problem_of(encoded), "trailing bytes: " + std::to_string(encoded.size()) +
                                     " bytes, header says " + std::to_string(encoded.size() - 1));
}

TEST(Entry, FutureFormatVersionIsRejectedAsSuch) {
  std::vector<std::byte> encoded = encode_entry(sample_entry("future"));
  encoded[8] = std::byte{3};
  EXPECT_EQ(problem_of(encoded), "format version 3, this kjit reads 2");
  // Even with a checksum that matches: the version is what a newer kjit changes.
  EXPECT_EQ(problem_of(assemble("{}", {}, 3)), "format version 3, this kjit reads 2");
}

// Version 1 wrote no `parameters` field: such an entry, wherever it is found, is refused for its
// version before its header is read.
TEST(Entry, AnEntryOfTheFirstFormatIsRejectedForItsVersion) {
  const Entry entry = sample_entry("first format");
  Json header = header_of(encode_entry(entry));
  header.erase("parameters");
  EXPECT_EQ(problem_of(assemble(header.dump(), entry.code, 1)),
            "format version 1, this kjit reads 2");
}

TEST(Entry, ChecksumMismatchIsNamed) {
  std::vector<std::byte> encoded = encode_entry(sample_entry("checksum"));
  encoded[encoded.size() - 20] ^= std::byte{0x10}; // in the code
  EXPECT_EQ(problem_of(encoded), "checksum mismatch");
}

TEST(Entry, EmptyAndGarbageInputAreRejected) {
  EXPECT_EQ(problem_of({}), "truncated: 0 bytes, the smallest entry is 40");
  std::mt19937 random(12345);
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::byte> garbage(random() % 300);
    for (std::byte &byte : garbage)
      byte = static_cast<std::byte>(random());
    // Half the rounds start like an entry, so the length and checksum checks see garbage too.
    if (round % 2 == 1 && garbage.size() >= 24) {
      std::vector<std::byte> start = prelude(kEntryFormatVersion, random() % 64, random() % 300);
      std::copy(start.begin(), start.end(), garbage.begin());
    }
    EXPECT_NE(problem_of(garbage), "") << "round " << round;
  }
}

TEST(Entry, ImpossibleLengthsDoNotOverflow) {
  std::vector<std::byte> bytes = prelude(kEntryFormatVersion, 0xFFFFFFFF, ~std::uint64_t{0});
  bytes.resize(100);
  EXPECT_EQ(problem_of(bytes), "truncated: 100 bytes, header says more than 2^64 (code length " +
                                   std::to_string(~std::uint64_t{0}) + ")");

  bytes = prelude(kEntryFormatVersion, 0, 5000);
  bytes.resize(100);
  EXPECT_EQ(problem_of(bytes), "truncated: 100 bytes, header says 5040");
}

TEST(Entry, BadHeadersWithValidChecksumsAreNamed) {
  const Entry entry = sample_entry("headers");
  const Json valid = header_of(encode_entry(entry));
  auto problem_with = [&](auto &&edit) {
    Json header = valid;
    edit(header);
    return problem_of(assemble(header.dump(), entry.code));
  };
  EXPECT_EQ(problem_with([](Json &) {}), "");
  EXPECT_EQ(problem_with([](Json &h) { h.erase("kernels"); }), "header: missing field 'kernels'");
  EXPECT_EQ(problem_with([](Json &h) { h["key"] = "abc"; }),
            "header: field 'key' is not 64 hex digits");
  EXPECT_EQ(problem_with([](Json &h) { h["target"] = 90; }),
            "header: field 'target' is not a string");
  EXPECT_EQ(problem_with([](Json &h) { h["kernels"] = Json::array({Json::array({"name"})}); }),
            "header: field 'kernels' is not a list of [string, string] pairs");
  EXPECT_EQ(problem_with([](Json &h) {
              h["key_inputs"] = Json::array({Json::array({"a", "b", "c"})});
            }),
            "header: field 'key_inputs' is not a list of [string, string] pairs");
  EXPECT_EQ(problem_with([](Json &h) { h["key_inputs"] = "format=1"; }),
            "header: field 'key_inputs' is not a list of [string, string] pairs");
  EXPECT_EQ(problem_with([](Json &h) { h.erase("parameters"); }),
            "header: missing field 'parameters'");
  for (const char *bad : {R"("T=float")", R"([["T"]])", R"([["T", 1.5]])", R"([[1, "float"]])",
                          R"([["T", ["float"]]])"})
    EXPECT_EQ(problem_with([&](Json &h) { h["parameters"] = Json::parse(bad); }),
              "header: field 'parameters' is not a list of [name, type or integer] pairs")
        << bad;
  EXPECT_EQ(problem_with([](Json &h) { h["created_unix"] = 1.5; }),
            "header: field 'created_unix' is not a 64-bit integer");
  EXPECT_EQ(problem_with([](Json &h) { h["created_unix"] = std::uint64_t{1} << 63; }),
            "header: field 'created_unix' is not a 64-bit integer");
  EXPECT_EQ(problem_with([](Json &h) { h["compile_ms"] = "fast"; }),
            "header: field 'compile_ms' is not a number");

  EXPECT_EQ(problem_of(assemble("[1, 2]", entry.code)), "header: not a JSON object");
  EXPECT_EQ(problem_of(assemble("{\"key\": ", entry.code)).rfind("header: ", 0), 0u);
  EXPECT_EQ(problem_of(assemble("{\"key\": \"\xff\"}", entry.code)).rfind("header: ", 0), 0u);
  EXPECT_EQ(problem_of(assemble("", entry.code)).rfind("header: ", 0), 0u);
}

TEST(Entry, DeeplyNestedHeaderDoesNotExhaustTheStack) {
  const std::string deep =
      "{\"key\": " + std::string(1'000'000, '[') + std::string(1'000'000, ']') + "}";
  EXPECT_EQ(problem_of(assemble(deep, {})), "header: field 'key' is not a string");
  EXPECT_EQ(problem_of(assemble(std::string(1'000'000, '['), {})).rfind("header: ", 0), 0u);
}

TEST(Entry, EncodeRefusesInvalidUtf8) {
  Entry entry = sample_entry("utf8");
  entry.header.key_inputs.emplace_back("param:name", "\xff\xfe");
  try {
    encode_entry(entry);
    FAIL() << "encode_entry accepted invalid UTF-8";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::cache_io);
  }
}

} // namespace
} // namespace kjit::cache

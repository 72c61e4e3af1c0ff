#include "tests/support/sample_entries.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <set>

namespace kjit::cache {
namespace {

using testing::golden_key_fields;

// SHA-256 of the documented serialisation of golden_key_fields(), computed outside kjit (Python's
// hashlib). If this changes, every cache on disk is silently invalidated: bump the format instead.
constexpr const char *kGoldenKey =
    "fbb59cf7a0593d6d1f0365f63354d532da627816775ac880fb0c64b6316e5a3d";

std::string run_key_printer() {
  auto printer =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kjit_cache_key_printer";
  std::FILE *pipe = ::popen(printer.c_str(), "r");
  if (pipe == nullptr)
    return "popen failed";
  std::array<char, 128> line{};
  std::string output = std::fgets(line.data(), line.size(), pipe) ? line.data() : "";
  ::pclose(pipe);
  if (!output.empty() && output.back() == '\n')
    output.pop_back();
  return output;
}

TEST(Key, MatchesTheDocumentedSerialisation) {
  EXPECT_EQ(key_of(golden_key_fields()).hex(), kGoldenKey);
}

TEST(Key, AnotherProcessComputesTheSameKey) {
  EXPECT_EQ(run_key_printer(), key_of(golden_key_fields()).hex());
}

TEST(Key, BuilderStartsWithTheFormatVersion) {
  KeyBuilder builder;
  ASSERT_EQ(builder.fields().size(), 1u);
  EXPECT_EQ(builder.fields()[0], KeyField("format", std::to_string(kEntryFormatVersion)));

  std::vector<KeyField> expected = golden_key_fields(); // written at format 1
  for (auto field = expected.begin() + 1; field != expected.end(); ++field)
    builder.add(field->first, field->second);
  expected[0].second = std::to_string(kEntryFormatVersion);
  EXPECT_EQ(builder.fields(), expected);
  EXPECT_EQ(builder.finish(), key_of(expected));
  // Every other input alike, another format version is another key.
  EXPECT_NE(key_of(expected).hex(), kGoldenKey);
}

TEST(Key, EveryNameValueAndPositionMatters) {
  const std::vector<KeyField> golden = golden_key_fields();
  std::vector<std::vector<KeyField>> variants{golden};
  for (std::size_t i = 0; i < golden.size(); ++i) {
    variants.push_back(golden);
    variants.back()[i].first += "x";
    variants.push_back(golden);
    variants.back()[i].second += "x";
    variants.push_back(golden);
    variants.back().erase(variants.back().begin() + static_cast<std::ptrdiff_t>(i));
    if (i + 1 < golden.size()) {
      variants.push_back(golden);
      std::swap(variants.back()[i], variants.back()[i + 1]);
    }
  }
  std::set<Key> keys;
  for (const auto &fields : variants)
    keys.insert(key_of(fields));
  EXPECT_EQ(keys.size(), variants.size());
}

// Each list differs from the others only in where the boundaries between names, values and fields
// fall, or holds text that looks like the serialisation itself.
TEST(Key, SerialisationIsInjectiveOnTrickyCases) {
  const std::vector<std::vector<KeyField>> cases = {
      {},
      {{"", ""}},
      {{"", ""}, {"", ""}},
      {{"a", "bc"}},
      {{"ab", "c"}},
      {{"abc", ""}},
      {{"", "abc"}},
      {{"a", "b"}, {"c", ""}},
      {{"a", ""}, {"b", "c"}},
      {{"x", "ab"}},
      {{"x", "a"}, {"x", "b"}},
      {{"x", "a"}, {"", "b"}},
      {{"10", ""}},
      {{"1", "0"}},
      {{"a", "b"}, {"c", "d"}},
      {{"a", "b\n1:c1:d"}},
      {{"1:a1:b\n", ""}},
      {{"a", "1:b\n"}},
      {{"a:", "b"}},
      {{"a", ":b"}},
      {{std::string("a\0", 2), "b"}},
      {{"a", std::string("\0b", 2)}},
  };
  std::set<Key> keys;
  for (const auto &fields : cases)
    keys.insert(key_of(fields));
  EXPECT_EQ(keys.size(), cases.size());
}

TEST(Key, HexRoundTrips) {
  Key key = key_of(golden_key_fields());
  std::string hex = key.hex();
  EXPECT_EQ(hex.size(), 64u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(Key::from_hex(hex), key);

  std::string upper = hex;
  for (char &c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(Key::from_hex(upper), key);
}

TEST(Key, FromHexRejectsAnythingButSixtyFourHexDigits) {
  const std::string hex = kGoldenKey;
  auto with_char = [&hex](std::size_t position, char c) {
    std::string changed = hex;
    changed[position] = c;
    return changed;
  };
  for (const std::string &bad : {std::string(), hex.substr(1), hex + "0", with_char(1, 'x'),
                                 with_char(63, 'g'), with_char(0, ' '), with_char(31, '\0')})
    EXPECT_FALSE(Key::from_hex(bad)) << '"' << bad << '"';
}

TEST(Key, Sha256HexMatchesKnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(KeyInputs, EachFieldNameHasItsKind) {
  EXPECT_EQ(key_input_kind("source"), KeyInputKind::source);
  EXPECT_EQ(key_input_kind("header:kjit/prelude.h"), KeyInputKind::header);
  EXPECT_EQ(key_input_kind("param:N"), KeyInputKind::parameter);
  EXPECT_EQ(key_input_kind("option"), KeyInputKind::option);
  EXPECT_EQ(key_input_kind("compiler"), KeyInputKind::compiler);
  EXPECT_EQ(key_input_kind("env:HIP_DEVICE_LIB_PATH"), KeyInputKind::environment);
  EXPECT_EQ(key_input_kind("target"), KeyInputKind::target);
  EXPECT_EQ(key_input_kind("format"), KeyInputKind::format);
  EXPECT_EQ(key_input_kind("manifest:x.h"), KeyInputKind::other) << "a newer kjit's field";
  EXPECT_EQ(to_string(KeyInputKind::compiler), "compiler build");
}

TEST(KeyInputs, SameFieldsHaveNoDifference) {
  const std::vector<KeyField> fields = {{"source", "a"}, {"option", "-O3"}, {"option", "-g"}};
  EXPECT_TRUE(diff_key_inputs(fields, fields).empty());
  const std::vector<KeyField> reordered = {{"source", "a"}, {"option", "-g"}, {"option", "-O3"}};
  EXPECT_TRUE(diff_key_inputs(fields, reordered).empty()) << "repeated fields compare as a set";
}

TEST(KeyInputs, AChangedValueIsOneDifferenceWithBothValues) {
  const auto differences = diff_key_inputs({{"param:N", "int:4096"}, {"source", "a"}},
                                           {{"param:N", "int:2048"}, {"source", "a"}});
  ASSERT_EQ(differences.size(), 1u);
  EXPECT_EQ(differences[0],
            (KeyDifference{KeyInputKind::parameter, "param:N", "int:4096", "int:2048"}));
}

TEST(KeyInputs, TheExpressionAParameterMakesIsNotASecondDifference) {
  const auto with_parameter = diff_key_inputs({{"expression", "f<4096>"}, {"param:N", "int:4096"}},
                                              {{"expression", "f<2048>"}, {"param:N", "int:2048"}});
  ASSERT_EQ(with_parameter.size(), 1u);
  EXPECT_EQ(with_parameter[0].kind, KeyInputKind::parameter);
  const auto alone = diff_key_inputs({{"expression", "f<4096>"}}, {{"expression", "g<4096>"}});
  ASSERT_EQ(alone.size(), 1u) << "a kernel renamed is named";
  EXPECT_EQ(alone[0].kind, KeyInputKind::expression);
}

TEST(KeyInputs, AnAddedOrRemovedValueHasOneSideEmpty) {
  const auto differences =
      diff_key_inputs({{"option", "-O3"}, {"option", "-g"}, {"header:a.h", "1"}},
                      {{"option", "-O3"}, {"option", "-ffast-math"}, {"header:b.h", "2"}});
  ASSERT_EQ(differences.size(), 4u);
  EXPECT_EQ(differences[0], (KeyDifference{KeyInputKind::option, "option", "-g", std::nullopt}));
  EXPECT_EQ(differences[1],
            (KeyDifference{KeyInputKind::option, "option", std::nullopt, "-ffast-math"}));
  EXPECT_EQ(differences[2], (KeyDifference{KeyInputKind::header, "header:a.h", "1", std::nullopt}));
  EXPECT_EQ(differences[3], (KeyDifference{KeyInputKind::header, "header:b.h", std::nullopt, "2"}));
}

} // namespace
} // namespace kjit::cache

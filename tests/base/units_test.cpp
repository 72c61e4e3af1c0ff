// Sizes and durations as people type them, and one clear refusal for anything else.
#include "kjit/units.hpp"

#include <gtest/gtest.h>

namespace kjit {
namespace {

TEST(ParseSize, ReadsNumbersWithBinaryUnits) {
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1048576"), 1048576u);
  EXPECT_EQ(parse_size("64K"), 64u * 1024);
  EXPECT_EQ(parse_size("500M"), 500u * 1024 * 1024);
  EXPECT_EQ(parse_size("500MB"), 500u * 1024 * 1024);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("100B"), 100u);
  EXPECT_EQ(parse_size("20", 1024 * 1024), 20u << 20) << "a bare number counts the bare unit";
}

TEST(ParseSize, RefusesWhatIsNotASize) {
  for (const char *bad : {"", "M", "-1", "1..5G", ".5G", "10X", "10 G", "1e9", "5GG", "5Gb2",
                          "99999999999999999999T"})
    EXPECT_EQ(parse_size(bad), std::nullopt) << bad;
}

TEST(ParseSize, RefusesNumbersTooLargeForADoubleWithoutThrowing) {
  // std::stod threw std::out_of_range here: KJIT_CACHE_SIZE and --max-size escaped as
  // "internal error: stod".
  const std::string huge(400, '9');
  EXPECT_EQ(parse_size(huge), std::nullopt);
  EXPECT_EQ(parse_size(huge + "G"), std::nullopt);
  EXPECT_EQ(parse_size("1." + std::string(400, '0')), 1u) << "a long fraction is still a number";
  EXPECT_EQ(parse_size(huge, 1024 * 1024), std::nullopt);
}

TEST(ParseDuration, NeedsAUnit) {
  EXPECT_EQ(parse_duration_seconds("30s"), 30);
  EXPECT_EQ(parse_duration_seconds("90m"), 5400);
  EXPECT_EQ(parse_duration_seconds("12h"), 43200);
  EXPECT_EQ(parse_duration_seconds("7d"), 604800);
  EXPECT_EQ(parse_duration_seconds("2w"), 1209600);
  EXPECT_EQ(parse_duration_seconds("1.5h"), 5400);
  for (const char *bad : {"", "7", "d", "-1d", "7y", "7dd", "1 d"})
    EXPECT_EQ(parse_duration_seconds(bad), std::nullopt) << bad;
}

TEST(ParseDuration, TakesUpToAThousandYearsAndRefusesMore) {
  EXPECT_EQ(parse_duration_seconds("20000w"), std::int64_t{20000} * 7 * 86400);
  EXPECT_EQ(parse_duration_seconds("365000d"), max_duration_seconds);
  EXPECT_EQ(parse_duration_seconds("365001d"), std::nullopt);
  // Up to 9.2e18 s passed before, which no caller could turn into nanoseconds.
  EXPECT_EQ(parse_duration_seconds("15250000000000w"), std::nullopt);
  EXPECT_EQ(parse_duration_seconds(std::string(400, '9') + "s"), std::nullopt);
}

TEST(HumanBytes, OneFormForEveryCommand) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(512), "512 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(std::uint64_t{20} << 20), "20.0 MiB");
  EXPECT_EQ(human_bytes(std::uint64_t{3} << 40), "3.0 TiB");
  EXPECT_EQ(human_bytes(std::uint64_t{5} << 50), "5120.0 TiB"); // no unit past TiB
}

} // namespace
} // namespace kjit

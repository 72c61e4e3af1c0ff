#pragma once
// Sizes and durations as people write them on a command line or in a variable.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kjit {

// "500M", "2G", "1.5G", "64K", "100": a byte count with an optional suffix K, M, G or T (powers
// of 1024, an optional trailing "B" or "iB" accepted). A bare number counts `bare_unit` bytes.
// nullopt for anything else, negative, or beyond 2^64.
std::optional<std::uint64_t> parse_size(std::string_view text, std::uint64_t bare_unit = 1);

// "512 B", "1.5 KiB", "20.0 MiB", "3.2 GiB": a byte count for people, in powers of 1024 with one
// decimal above bytes. The one human form of a size in every command's output.
std::string human_bytes(std::uint64_t bytes);

// The longest duration kjit takes: 1000 years of 365 days. In nanoseconds it is still beyond a
// signed 64-bit count, so users of a duration saturate when they convert it.
inline constexpr std::int64_t max_duration_seconds = 1000LL * 365 * 86400;

// "30s", "90m", "12h", "7d", "2w": seconds, with the unit required (a bare "7" could mean days
// to one reader and seconds to another). nullopt for anything else or beyond
// max_duration_seconds.
std::optional<std::int64_t> parse_duration_seconds(std::string_view text);

} // namespace kjit

#include "kjit/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace kjit {

namespace {

// The number at the start of `text` (digits, one optional fraction) and what follows it;
// nullopt for a number too large for a double (never an exception: every caller reads untrusted
// text).
std::optional<double> leading_number(std::string_view text, std::string_view &rest) {
  const std::size_t end = text.find_first_not_of("0123456789.");
  const std::string_view digits = text.substr(0, end);
  if (digits.empty() || digits.front() == '.' || digits.find('.') != digits.rfind('.'))
    return std::nullopt;
  rest = end == std::string_view::npos ? std::string_view() : text.substr(end);
  double number = 0;
  const auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), number,
                                             std::chars_format::fixed);
  if (error != std::errc() || stop != digits.data() + digits.size())
    return std::nullopt;
  return number;
}

} // namespace

std::optional<std::uint64_t> parse_size(std::string_view text, std::uint64_t bare_unit) {
  std::string_view suffix;
  const std::optional<double> number = leading_number(text, suffix);
  if (!number)
    return std::nullopt;
  double unit = static_cast<double>(bare_unit);
  if (!suffix.empty()) {
    const char scale = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix.front())));
    const std::string_view tail = suffix.substr(1);
    if (tail != "" && tail != "B" && tail != "iB" && tail != "b")
      return std::nullopt;
    switch (scale) {
    case 'K':
      unit = 1024.0;
      break;
    case 'M':
      unit = 1024.0 * 1024;
      break;
    case 'G':
      unit = 1024.0 * 1024 * 1024;
      break;
    case 'T':
      unit = 1024.0 * 1024 * 1024 * 1024;
      break;
    case 'B':
      if (!tail.empty())
        return std::nullopt;
      unit = 1;
      break;
    default:
      return std::nullopt;
    }
  }
  const double bytes = std::floor(*number * unit);
  if (!(bytes < 18446744073709551616.0)) // 2^64, and NaN
    return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::optional<std::int64_t> parse_duration_seconds(std::string_view text) {
  std::string_view suffix;
  const std::optional<double> number = leading_number(text, suffix);
  if (!number || suffix.size() != 1)
    return std::nullopt;
  double seconds_per_unit = 0;
  switch (suffix.front()) {
  case 's':
    seconds_per_unit = 1;
    break;
  case 'm':
    seconds_per_unit = 60;
    break;
  case 'h':
    seconds_per_unit = 3600;
    break;
  case 'd':
    seconds_per_unit = 86400;
    break;
  case 'w':
    seconds_per_unit = 7 * 86400;
    break;
  default:
    return std::nullopt;
  }
  const double seconds = std::floor(*number * seconds_per_unit);
  if (!(seconds <= static_cast<double>(max_duration_seconds)))
    return std::nullopt;
  return static_cast<std::int64_t>(seconds);
}

std::string human_bytes(std::uint64_t bytes) {
  static constexpr const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(units)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

} // namespace kjit

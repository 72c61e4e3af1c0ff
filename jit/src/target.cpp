#include "kjit/jit/target.hpp"

#include "kjit/error.hpp"

#include <algorithm>
#include <xxhash.h>

namespace kjit::jit {
namespace {

constexpr std::string_view expected_forms =
    "expected an AMD id such as gfx90a or gfx90a:sramecc+:xnack- (gfx<hex digits>, then "
    "':<feature>+' or ':<feature>-' items) or an NVIDIA id such as sm_90 or sm_90a "
    "(sm_<number>, optionally followed by 'a' or 'f'), in lower case without spaces";

[[noreturn]] void reject(std::string_view text, std::string_view reason) {
  throw Error(Errc::bad_target, "bad target '" + std::string(text) + "': " + std::string(reason) +
                                    "; " + std::string(expected_forms));
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }
bool is_lower_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z'); }

// A leading zero would give one processor two spellings ("sm_090", "sm_90") and so two keys.
bool is_number_without_leading_zero(std::string_view digits, bool (*digit)(char)) {
  return !digits.empty() && digits.front() != '0' &&
         std::all_of(digits.begin(), digits.end(), digit);
}

std::string parse_nvidia_arch(std::string_view text) {
  if (text.find(':') != std::string_view::npos)
    reject(text, "NVIDIA targets take no ':feature' items");
  std::string_view number = text.substr(3);
  if (!number.empty() && (number.back() == 'a' || number.back() == 'f'))
    number.remove_suffix(1);
  if (!is_number_without_leading_zero(number, is_digit))
    reject(text, "'sm_' must be followed by a number without leading zeros");
  return std::string(text);
}

// Parses the ":name+" / ":name-" items that follow an AMD processor, `items` starting at the
// first ':'.
std::vector<TargetFeature> parse_amd_features(std::string_view text, std::string_view items) {
  std::vector<TargetFeature> features;
  while (!items.empty()) {
    items.remove_prefix(1); // the ':'
    std::string_view item = items.substr(0, items.find(':'));
    items.remove_prefix(item.size());
    if (item.size() < 2 || (item.back() != '+' && item.back() != '-'))
      reject(text, "each feature is a name followed by '+' or '-', as in ':xnack-'");
    std::string_view name = item.substr(0, item.size() - 1);
    if (!std::all_of(name.begin(), name.end(), is_lower_alnum))
      reject(text, "feature names are lower-case letters and digits");
    auto same_name = [&](const TargetFeature &feature) { return feature.name == name; };
    if (std::any_of(features.begin(), features.end(), same_name))
      reject(text, "feature '" + std::string(name) + "' is given twice");
    features.push_back({std::string(name), item.back() == '+'});
  }
  std::sort(features.begin(), features.end(),
            [](const TargetFeature &a, const TargetFeature &b) { return a.name < b.name; });
  return features;
}

} // namespace

Target Target::parse(std::string_view text) {
  Target target;
  if (text.starts_with("sm_")) {
    target.vendor_ = Vendor::nvidia;
    target.arch_ = parse_nvidia_arch(text);
    target.id_ = target.arch_;
  } else if (text.starts_with("gfx")) {
    target.vendor_ = Vendor::amd;
    std::string_view processor = text.substr(0, text.find(':'));
    if (!is_number_without_leading_zero(processor.substr(3), is_hex_digit))
      reject(text, "'gfx' must be followed by hexadecimal digits (lower case, no leading zero)");
    target.arch_ = std::string(processor);
    target.features_ = parse_amd_features(text, text.substr(processor.size()));
    target.id_ = target.arch_;
    for (const TargetFeature &feature : target.features_)
      target.id_ += ":" + feature.name + (feature.enabled ? "+" : "-");
  } else {
    reject(text, "it starts with neither 'gfx' nor 'sm_'");
  }
  target.hash_ = XXH3_64bits(target.id_.data(), target.id_.size());
  return target;
}

int Target::warp_size() const {
  if (vendor_ == Vendor::nvidia)
    return 32;
  return arch_.size() >= 7 ? 32 : 64; // "gfx" then the version: gfx90a (CDNA), gfx1030 (RDNA)
}

} // namespace kjit::jit

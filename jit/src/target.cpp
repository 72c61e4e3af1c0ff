#include "kjit/jit/target.hpp"

#include "kjit/error.hpp"
#include "kjit/text.hpp"

#include <algorithm>
#include <bit>
#include <xxhash.h>

namespace kjit::jit {
namespace {

constexpr std::string_view expected_forms =
    "expected an AMD id such as gfx90a, gfx90a:sramecc+:xnack- or gfx11-generic (gfx<hex "
    "digits> or a generic target, then ':<feature>+' or ':<feature>-' items) or an NVIDIA id such "
    "as sm_90 or sm_90a "
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

// LLVM's AMDGPUUsage, table "AMDGPU Generic Processors": each generic target, the processors
// its code runs on, and the target features it takes.
struct GenericTarget {
  std::string_view name;
  std::vector<std::string_view> processors;
  std::vector<std::string_view> features;
  int warp_size;
};

const std::vector<GenericTarget> &generic_targets() {
  static const std::vector<GenericTarget> table{
      {"gfx9-generic", {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}, {"xnack"}, 64},
      {"gfx9-4-generic", {"gfx940", "gfx941", "gfx942", "gfx950"}, {"sramecc", "xnack"}, 64},
      {"gfx10-1-generic",
       {"gfx1010", "gfx1011", "gfx1012", "gfx1013"},
       {"cumode", "wavefrontsize64", "xnack"},
       32},
      {"gfx10-3-generic",
       {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"},
       {"cumode", "wavefrontsize64"},
       32},
      {"gfx11-generic",
       {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"},
       {"cumode", "wavefrontsize64"},
       32},
      {"gfx12-generic", {"gfx1200", "gfx1201"}, {"cumode", "wavefrontsize64"}, 32},
  };
  return table;
}

const GenericTarget *find_generic(std::string_view name) {
  for (const GenericTarget &generic : generic_targets())
    if (generic.name == name)
      return &generic;
  return nullptr;
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
    const GenericTarget *generic = find_generic(processor);
    if (generic == nullptr && !is_number_without_leading_zero(processor.substr(3), is_hex_digit))
      reject(text, "'gfx' must be followed by hexadecimal digits (lower case, no leading zero) "
                   "or be a generic target (" +
                       generic_target_names() + ")");
    target.arch_ = std::string(processor);
    target.features_ = parse_amd_features(text, text.substr(processor.size()));
    if (generic != nullptr)
      for (const TargetFeature &feature : target.features_)
        if (std::find(generic->features.begin(), generic->features.end(), feature.name) ==
            generic->features.end())
          reject(text, std::string(processor) + " takes no feature '" + feature.name +
                           "'; its features: " + join(generic->features));
    target.id_ = target.arch_;
    for (const TargetFeature &feature : target.features_)
      target.id_ += ":" + feature.name + (feature.enabled ? "+" : "-");
  } else {
    reject(text, "it starts with neither 'gfx' nor 'sm_'");
  }
  target.hash_ = XXH3_64bits(target.id_.data(), target.id_.size());
  return target;
}

bool Target::is_generic() const { return find_generic(arch_) != nullptr; }

int Target::warp_size() const {
  if (vendor_ == Vendor::nvidia)
    return 32;
  if (const GenericTarget *generic = find_generic(arch_))
    return generic->warp_size;
  return arch_.size() >= 7 ? 32 : 64; // "gfx" then the version: gfx90a (CDNA), gfx1030 (RDNA)
}

namespace {

// `arch` with each subset of `features`, the larger subsets first, in feature-name order.
void add_feature_subsets(std::vector<Target> &targets, const std::string &arch,
                         const std::vector<TargetFeature> &features) {
  const unsigned count = static_cast<unsigned>(features.size());
  for (int size = static_cast<int>(count); size >= 0; --size)
    for (unsigned mask = (1u << count); mask-- > 0;) {
      if (std::popcount(mask) != size)
        continue;
      std::string id = arch;
      for (unsigned i = 0; i < count; ++i)
        if (mask & (1u << i))
          id += ":" + features[i].name + (features[i].enabled ? "+" : "-");
      targets.push_back(Target::parse(id));
    }
}

} // namespace

std::vector<Target> serving_targets(const Target &target) {
  std::vector<Target> targets;
  if (target.vendor() == Vendor::nvidia) {
    targets.push_back(target);
    const std::string &arch = target.arch();
    if (arch.ends_with('a') || arch.ends_with('f'))
      targets.push_back(Target::parse(arch.substr(0, arch.size() - 1)));
    return targets;
  }
  add_feature_subsets(targets, target.arch(), target.features());
  if (std::optional<std::string> family = generic_family(target.arch())) {
    const GenericTarget &generic = *find_generic(*family);
    std::vector<TargetFeature> taken;
    for (const TargetFeature &feature : target.features())
      if (std::find(generic.features.begin(), generic.features.end(), feature.name) !=
          generic.features.end())
        taken.push_back(feature);
    add_feature_subsets(targets, *family, taken);
  }
  return targets;
}

std::string generic_target_names() {
  std::vector<std::string_view> names;
  for (const GenericTarget &generic : generic_targets())
    names.push_back(generic.name);
  return join(names);
}

std::optional<std::string> generic_family(std::string_view processor) {
  for (const GenericTarget &generic : generic_targets())
    if (std::find(generic.processors.begin(), generic.processors.end(), processor) !=
        generic.processors.end())
      return std::string(generic.name);
  return std::nullopt;
}

} // namespace kjit::jit

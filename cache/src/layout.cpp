#include "kjit/cache/layout.hpp"

#include "kjit/cache/entry.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"

#include <algorithm>

namespace kjit::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kEntryExtension = ".kjit";
constexpr std::string_view kManifestExtension = ".manifest";
constexpr std::string_view kTempMark = ".tmp.";
constexpr std::size_t kKeyHexSize = 64;

bool is_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// "<key hex><extension>" in the shard of its first two hex digits.
bool is_keyed_name(std::string_view name, std::string_view shard, std::string_view extension) {
  return name.size() == kKeyHexSize + extension.size() && name.substr(0, 2) == shard &&
         name.ends_with(extension) && is_hex(name.substr(0, kKeyHexSize));
}

// Whether `target` is a canonical target id, as jit::Target writes it ("sm_90a",
// "gfx90a:sramecc+:xnack-"). Entries come from archives, remotes and planted files, and their
// target becomes a directory: a name such as "tuning", "lock" or ".." would reach kjit's own
// folders or leave the tier.
bool is_canonical_target(std::string_view target) {
  try {
    return jit::Target::parse(target).id() == target;
  } catch (const Error &) {
    return false;
  }
}

std::string checked_target_directory(std::string_view target) {
  std::optional<std::string> directory = Layout::target_directory(target);
  if (!directory)
    throw Error(Errc::bad_target, Layout::invalid_target_problem(target));
  return std::move(*directory);
}

// <version directory>/<target dir>/<2 hex>/<key hex><extension>
fs::path sharded_path(const fs::path &version_directory, std::string_view target, const Key &key,
                      std::string_view extension) {
  std::string name = key.hex();
  const std::string shard = name.substr(0, 2);
  name += extension;
  return version_directory / checked_target_directory(target) / shard / name;
}

} // namespace

Layout::Layout(fs::path root)
    : root_(std::move(root)), version_directory_(root_ / version_name()) {}

std::string Layout::version_name() {
  std::string name(1, 'v'); // appended: GCC 12 warns wrongly on "v" + string
  name += std::to_string(kEntryFormatVersion);
  return name;
}

fs::path Layout::entry_path(const Key &key, std::string_view target) const {
  return sharded_path(version_directory_, target, key, kEntryExtension);
}

fs::path Layout::manifest_path(const Key &base, std::string_view target) const {
  return sharded_path(version_directory_, target, base, kManifestExtension);
}

fs::path Layout::tuning_record_name(const Key &key, std::string_view target) {
  return fs::path(checked_target_directory(target)) / (key.hex() + ".json");
}

std::optional<std::string> Layout::target_directory(std::string_view target) {
  if (!is_canonical_target(target))
    return std::nullopt;
  std::string directory(target);
  std::replace(directory.begin(), directory.end(), ':', '_');
  return directory;
}

std::string Layout::target_of_directory(std::string_view directory) {
  std::string target(directory);
  for (std::size_t at = target.find('_'); at != std::string::npos; at = target.find('_', at + 1)) {
    const std::size_t part_end = std::min(target.find('_', at + 1), target.size());
    const char last = target[part_end - 1];
    if (part_end > at + 1 && (last == '+' || last == '-'))
      target[at] = ':';
  }
  return target;
}

std::string Layout::invalid_target_problem(std::string_view target) {
  return "target id \"" + std::string(target) +
         "\" cannot name a cache directory: it is not a canonical target id";
}

bool Layout::is_shard_name(std::string_view name) { return name.size() == 2 && is_hex(name); }

bool Layout::is_entry_name(std::string_view name, std::string_view shard) {
  return is_keyed_name(name, shard, kEntryExtension);
}

bool Layout::is_manifest_name(std::string_view name, std::string_view shard) {
  return is_keyed_name(name, shard, kManifestExtension);
}

std::string_view Layout::entry_key_hex(std::string_view entry_name) {
  return entry_name.substr(0, kKeyHexSize);
}

bool Layout::is_temp_name(std::string_view name) {
  return name.starts_with('.') && name.find(kTempMark) != name.npos;
}

std::string Layout::temp_prefix(std::string_view stem) {
  std::string prefix(1, '.'); // appended piece by piece: GCC 12 warns wrongly on "." + string
  prefix += stem;
  prefix += kTempMark;
  return prefix;
}

} // namespace kjit::cache

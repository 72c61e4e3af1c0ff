#include "kjit/cache/disk_store.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"

#include <algorithm>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace kjit::cache {

namespace fs = std::filesystem;

namespace {

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

// The directory name of a target id, or nullopt for one that is not a canonical target id.
std::optional<std::string> target_directory(std::string_view target) {
  if (!is_canonical_target(target))
    return std::nullopt;
  std::string directory(target);
  std::replace(directory.begin(), directory.end(), ':', '_');
  return directory;
}

std::string invalid_target_problem(std::string_view target) {
  return "target id \"" + std::string(target) +
         "\" cannot name a cache directory: it is not a canonical target id";
}

fs::path entry_path_in(const fs::path &versioned_root, const std::string &target_directory,
                       const Key &key) {
  std::string hex = key.hex();
  return versioned_root / target_directory / hex.substr(0, 2) / (hex + ".kjit");
}

// "v<N>": a new entry format gets a tree of its own, so kjit versions can share one root.
std::string version_directory() {
  std::string name(1, 'v'); // appended: GCC 12 warns wrongly on "v" + string
  name += std::to_string(kEntryFormatVersion);
  return name;
}

std::string read_only_problem(const fs::path &root) {
  return root.string() + " is read-only (prebuilt tier)";
}

} // namespace

std::string target_of_directory(std::string_view directory) {
  std::string target(directory);
  for (std::size_t at = target.find('_'); at != std::string::npos; at = target.find('_', at + 1)) {
    const std::size_t part_end = std::min(target.find('_', at + 1), target.size());
    const char last = target[part_end - 1];
    if (part_end > at + 1 && (last == '+' || last == '-'))
      target[at] = ':';
  }
  return target;
}

DiskStore::DiskStore(fs::path root, Access access)
    : root_(std::move(root)), versioned_root_(root_ / version_directory()), access_(access) {}

fs::path DiskStore::entry_path(const Key &key, std::string_view target) const {
  std::optional<std::string> directory = target_directory(target);
  if (!directory)
    throw Error(Errc::bad_target, invalid_target_problem(target));
  return entry_path_in(versioned_root_, *directory, key);
}

Lookup DiskStore::read(const Key &key, std::string_view target) const {
  Lookup lookup;
  auto reject = [&lookup](std::string problem) {
    lookup.status = Lookup::Status::rejected;
    lookup.problem = std::move(problem);
    return std::move(lookup);
  };
  try {
    std::optional<std::string> directory = target_directory(target);
    if (!directory)
      return reject(invalid_target_problem(target));
    lookup.path = entry_path_in(versioned_root_, *directory, key);

    PrivateFile file = read_private_file(lookup.path);
    if (file.missing)
      return lookup;
    if (!file.problem.empty())
      return reject(std::move(file.problem));
    Decoded decoded = decode_entry_for(file.bytes, key, target);
    if (!decoded.entry)
      return reject(std::move(decoded.problem));
    lookup.status = Lookup::Status::hit;
    lookup.last_use_ns = file.mtime_ns;
    lookup.entry = std::move(decoded.entry);
    return lookup;
  } catch (const std::exception &error) { // out of memory: still a rejected read, not a throw
    return reject(std::string("cannot read: ") + error.what());
  }
}

void DiskStore::write(const Entry &entry) const {
  const fs::path path = entry_path(entry.header.key, entry.header.target);
  auto failure = [&path](const std::string &what) {
    return Error(Errc::cache_io, "cannot write cache entry " + path.string() + ": " + what);
  };
  if (access_ == Access::read_only)
    throw failure(read_only_problem(root_));
  publish_private_file(path, encode_entry(entry), entry.header.key.hex(), "cache entry");
}

DiskStore::ManifestLookup DiskStore::read_manifest(const Key &base, std::string_view target) const {
  ManifestLookup lookup;
  try {
    std::optional<std::string> directory = target_directory(target);
    if (!directory) {
      lookup.problem = invalid_target_problem(target);
      return lookup;
    }
    lookup.path = entry_path_in(versioned_root_, *directory, base).replace_extension(".manifest");
    PrivateFile file = read_private_file(lookup.path);
    if (file.missing)
      return lookup;
    if (!file.problem.empty()) {
      lookup.problem = std::move(file.problem);
      return lookup;
    }
    DecodedManifest decoded = decode_manifest(
        std::string_view(reinterpret_cast<const char *>(file.bytes.data()), file.bytes.size()),
        base);
    lookup.manifest = std::move(decoded.manifest);
    lookup.problem = std::move(decoded.problem);
  } catch (const std::exception &error) { // out of memory: a problem, not a throw
    lookup.manifest.reset();
    lookup.problem = std::string("cannot read: ") + error.what();
  }
  return lookup;
}

void DiskStore::write_manifest(const HeaderManifest &manifest, std::string_view target) const {
  const fs::path path = entry_path(manifest.base, target).replace_extension(".manifest");
  if (access_ == Access::read_only)
    throw Error(Errc::cache_io,
                "cannot write header manifest " + path.string() + ": " + read_only_problem(root_));
  const std::string text = encode_manifest(manifest);
  publish_private_file(path, std::as_bytes(std::span(text.data(), text.size())),
                       manifest.base.hex(), "header manifest");
}

void DiskStore::record_use(const Lookup &hit) const {
  constexpr std::int64_t minute_ns = 60'000'000'000;
  const std::int64_t now_ns = unix_now_ns();
  if (access_ == Access::read_only || hit.status != Lookup::Status::hit ||
      hit.last_use_ns > now_ns - minute_ns) // not now - last use: that overflows for year 1600
    return;
  ::utimensat(AT_FDCWD, hit.path.c_str(), nullptr, 0); // a failure only ages the entry
}

std::string DiskStore::remove(const Key &key, std::string_view target) const {
  std::optional<std::string> directory = target_directory(target);
  if (access_ == Access::read_only)
    return read_only_problem(root_);
  if (!directory)
    return invalid_target_problem(target);
  return remove_private_path(entry_path_in(versioned_root_, *directory, key));
}

void DiskStore::prepare_lock(const Key &key) const {
  auto failure = [&key](const std::string &what) {
    return Error(Errc::cache_io, "cannot lock cache key " + key.hex() + ": " + what);
  };
  if (access_ == Access::read_only)
    throw failure(read_only_problem(root_));
  if (std::string problem = make_private_directories(versioned_root_); !problem.empty())
    throw failure(problem);
}

FileLock DiskStore::lock(const Key &key) const {
  prepare_lock(key);
  return FileLock(lock_path(), key);
}

std::optional<FileLock> DiskStore::lock(const Key &key, std::chrono::milliseconds wait,
                                        std::chrono::milliseconds poll) const {
  prepare_lock(key);
  return FileLock::try_for(lock_path(), key, wait, poll);
}

} // namespace kjit::cache

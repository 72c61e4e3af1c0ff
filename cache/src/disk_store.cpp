#include "kjit/cache/disk_store.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

namespace kjit::cache {

namespace fs = std::filesystem;

namespace {

std::string read_only_problem(const fs::path &root) {
  return root.string() + " is read-only (prebuilt tier)";
}

} // namespace

DiskStore::DiskStore(fs::path root, Access access) : layout_(std::move(root)), access_(access) {}

Lookup DiskStore::read(const Key &key, std::string_view target) const {
  Lookup lookup;
  auto reject = [&lookup](std::string problem) {
    lookup.status = Lookup::Status::rejected;
    lookup.problem = std::move(problem);
    return std::move(lookup);
  };
  try {
    try {
      lookup.path = layout_.entry_path(key, target);
    } catch (const Error &invalid_target) {
      return reject(invalid_target.summary());
    }

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
  const fs::path path = layout_.entry_path(entry.header.key, entry.header.target);
  auto failure = [&path](const std::string &what) {
    return Error(Errc::cache_io, "cannot write cache entry " + path.string() + ": " + what);
  };
  if (access_ == Access::read_only)
    throw failure(read_only_problem(root()));
  publish_private_file(path, encode_entry(entry), entry.header.key.hex(), "cache entry");
}

DiskStore::ManifestLookup DiskStore::read_manifest(const Key &base, std::string_view target) const {
  ManifestLookup lookup;
  try {
    try {
      lookup.path = layout_.manifest_path(base, target);
    } catch (const Error &invalid_target) {
      lookup.problem = invalid_target.summary();
      return lookup;
    }
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
  const fs::path path = layout_.manifest_path(manifest.base, target);
  if (access_ == Access::read_only)
    throw Error(Errc::cache_io,
                "cannot write header manifest " + path.string() + ": " + read_only_problem(root()));
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
  if (access_ == Access::read_only)
    return read_only_problem(root());
  fs::path path;
  try {
    path = layout_.entry_path(key, target);
  } catch (const Error &invalid_target) {
    return invalid_target.summary();
  }
  return remove_private_path(path);
}

void DiskStore::prepare_lock(const Key &key) const {
  auto failure = [&key](const std::string &what) {
    return Error(Errc::cache_io, "cannot lock cache key " + key.hex() + ": " + what);
  };
  if (access_ == Access::read_only)
    throw failure(read_only_problem(root()));
  if (std::string problem = make_private_directories(layout_.version_directory()); !problem.empty())
    throw failure(problem);
}

FileLock DiskStore::lock(const Key &key) const {
  prepare_lock(key);
  return FileLock(layout_.lock_path(), key);
}

std::optional<FileLock> DiskStore::lock(const Key &key, std::chrono::milliseconds wait,
                                        std::chrono::milliseconds poll) const {
  prepare_lock(key);
  return FileLock::try_for(layout_.lock_path(), key, wait, poll);
}

} // namespace kjit::cache

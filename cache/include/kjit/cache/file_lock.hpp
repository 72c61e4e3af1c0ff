#pragma once
// A per-key exclusive lock between processes and threads: an fcntl OFD lock on one byte of a
// shared lock file, the byte chosen from the key. Held by a file descriptor, so it is released
// when the holder exits or is killed: no pid files that leak and hang (AITER #5266), no lock
// files left per key.
#include "kjit/cache/key.hpp"

#include <filesystem>

namespace kjit::cache {

class FileLock {
public:
  // Blocks until the lock on `key` in `lock_file` is held. Creates the file (0600) if needed.
  // Throws Error(cache_io) when the file cannot be opened or locked.
  FileLock(const std::filesystem::path &lock_file, const Key &key);
  ~FileLock();
  FileLock(FileLock &&other) noexcept;
  FileLock &operator=(FileLock &&other) noexcept;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

private:
  int fd_ = -1;
};

} // namespace kjit::cache

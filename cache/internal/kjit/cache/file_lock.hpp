#pragma once
// A per-key exclusive lock between processes and threads: an fcntl OFD lock on one byte of a
// shared lock file, the byte chosen from the key. Held by a file descriptor, so it is released
// when the holder exits or is killed: no pid files that leak and hang (AITER #5266), no lock
// files left per key.
#include "kjit/cache/key.hpp"

#include <chrono>
#include <filesystem>
#include <optional>

namespace kjit::cache {

class FileLock {
public:
  // Blocks until the lock on `key` in `lock_file` is held. Creates the file (0600) if needed.
  // Throws Error(cache_io) when the file cannot be opened or locked.
  FileLock(const std::filesystem::path &lock_file, const Key &key);
  // The lock on `key` once taken, trying every `poll` for at most `wait`; nullopt when another
  // holder keeps it that long (a waiter that must not hang on a holder that hangs). Throws as the
  // constructor does.
  static std::optional<FileLock> try_for(const std::filesystem::path &lock_file, const Key &key,
                                         std::chrono::milliseconds wait,
                                         std::chrono::milliseconds poll);
  ~FileLock();
  FileLock(FileLock &&other) noexcept;
  FileLock &operator=(FileLock &&other) noexcept;
  FileLock(const FileLock &) = delete;
  FileLock &operator=(const FileLock &) = delete;

private:
  FileLock() = default;
  int fd_ = -1;
};

// The lock file opened once, for trying many keys' locks without waiting: a remover skips an entry
// whose key a writer holds rather than wait for its compile. Every lock it takes belongs to its one
// open file description, so threads sharing it do not exclude one another: give them distinct keys.
class LockTrier {
public:
  // Creates the file (0600) if needed. Throws Error(cache_io) when it cannot be opened.
  explicit LockTrier(const std::filesystem::path &lock_file);
  ~LockTrier();
  LockTrier(const LockTrier &) = delete;
  LockTrier &operator=(const LockTrier &) = delete;

  // Takes `key`'s lock and returns true, or returns false at once when another holder has it (or
  // it cannot be taken). Release it with unlock().
  bool try_lock(const Key &key) const;
  void unlock(const Key &key) const;

private:
  int fd_ = -1;
};

} // namespace kjit::cache

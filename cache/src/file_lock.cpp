#include "kjit/cache/file_lock.hpp"

#include "kjit/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace kjit::cache {

namespace {

// The byte locked for a key: the digest's first 8 bytes below 2^40, so that two keys share a byte
// (and wait for each other needlessly) with probability 2^-40. The file never grows: locks past
// its end are allowed.
off_t lock_offset(const Key &key) {
  std::uint64_t prefix = 0;
  for (std::size_t i = 0; i < 8; ++i)
    prefix = prefix << 8 | key.digest[i];
  return static_cast<off_t>(prefix & ((std::uint64_t{1} << 40) - 1));
}

// fcntl(F_OFD_SETLK or F_OFD_SETLKW) of `type` on `key`'s byte, retried when interrupted.
int set_lock(int fd, const Key &key, short type, int command) {
  struct flock region {};
  region.l_type = type;
  region.l_whence = SEEK_SET;
  region.l_start = lock_offset(key);
  region.l_len = 1;
  int result;
  do {
    result = ::fcntl(fd, command, &region);
  } while (result < 0 && errno == EINTR);
  return result;
}

int open_lock_file(const std::filesystem::path &lock_file) {
  return ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

[[noreturn]] void fail(const std::filesystem::path &lock_file, const Key &key, const char *step,
                       int error) {
  throw Error(Errc::cache_io, "cannot lock cache key " + key.hex() + " in " + lock_file.string() +
                                  ": " + step + ": " + std::strerror(error));
}

} // namespace

FileLock::FileLock(const std::filesystem::path &lock_file, const Key &key) {
  fd_ = open_lock_file(lock_file);
  if (fd_ < 0)
    fail(lock_file, key, "open", errno);
  // An OFD lock belongs to this open file description, not to the process: two threads with
  // their own FileLock exclude each other, and closing the descriptor releases it.
  if (set_lock(fd_, key, F_WRLCK, F_OFD_SETLKW) < 0) {
    int error = errno;
    ::close(fd_);
    fail(lock_file, key, "fcntl(F_OFD_SETLKW)", error);
  }
}

std::optional<FileLock> FileLock::try_for(const std::filesystem::path &lock_file, const Key &key,
                                          std::chrono::milliseconds wait,
                                          std::chrono::milliseconds poll) {
  FileLock lock;
  lock.fd_ = open_lock_file(lock_file);
  if (lock.fd_ < 0)
    fail(lock_file, key, "open", errno);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (set_lock(lock.fd_, key, F_WRLCK, F_OFD_SETLK) < 0) {
    if (errno != EAGAIN && errno != EACCES)
      fail(lock_file, key, "fcntl(F_OFD_SETLK)", errno);
    if (std::chrono::steady_clock::now() + poll > deadline)
      return std::nullopt;
    std::this_thread::sleep_for(poll);
  }
  return lock;
}

FileLock::~FileLock() {
  if (fd_ >= 0)
    ::close(fd_);
}

FileLock::FileLock(FileLock &&other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileLock &FileLock::operator=(FileLock &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

LockTrier::LockTrier(const std::filesystem::path &lock_file) : fd_(open_lock_file(lock_file)) {
  if (fd_ < 0)
    throw Error(Errc::cache_io,
                "cannot open lock file " + lock_file.string() + ": " + std::strerror(errno));
}

LockTrier::~LockTrier() { ::close(fd_); }

bool LockTrier::try_lock(const Key &key) const {
  return set_lock(fd_, key, F_WRLCK, F_OFD_SETLK) == 0;
}

void LockTrier::unlock(const Key &key) const { set_lock(fd_, key, F_UNLCK, F_OFD_SETLK); }

} // namespace kjit::cache

#include "kjit/cache/private_file.hpp"

#include "kjit/cache/layout.hpp"
#include "kjit/error.hpp"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <random>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace kjit::cache {

namespace fs = std::filesystem;

namespace {

class UniqueFd {
public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

private:
  int fd_;
};

std::string errno_text() { return std::strerror(errno); }

std::string octal(unsigned value) {
  char text[16];
  return std::string(text, std::to_chars(text, text + sizeof text, value, 8).ptr);
}

// Why a file or directory with this status may not be trusted, or "" when it may: someone other
// than this user or root could have planted or changed what is in it.
std::string untrusted_reason(const struct stat &status) {
  if (status.st_uid != ::geteuid() && status.st_uid != 0)
    return "owned by uid " + std::to_string(status.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + ") or root";
  if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return "writable by group or others (mode " + octal(status.st_mode & 07777) + ")";
  return {};
}

// A temp file name no other process or thread uses: the layout's temp prefix (which keeps it out of
// listings and marks it for cleanup after a crash), then the pid, a per-process random number
// (pids repeat across containers sharing a cache) and a counter.
std::string unique_temp_name(std::string_view stem) {
  static const std::uint64_t process_nonce = [] {
    std::random_device random;
    return std::uint64_t{random()} << 32 | random();
  }();
  static std::atomic<std::uint64_t> counter{0};
  char nonce[17];
  std::string name = Layout::temp_prefix(stem);
  name += std::to_string(::getpid());
  name += '.';
  name.append(nonce, std::to_chars(nonce, nonce + sizeof nonce, process_nonce, 16).ptr);
  name += '.';
  name += std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  return name;
}

bool write_all(int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote < 0)
      return false;
    bytes = bytes.subspan(static_cast<std::size_t>(wrote));
  }
  return true;
}

} // namespace

std::int64_t saturating_ns(std::int64_t seconds) {
  std::int64_t ns = 0;
  if (__builtin_mul_overflow(seconds, std::int64_t{1000000000}, &ns))
    return seconds < 0 ? std::numeric_limits<std::int64_t>::min()
                       : std::numeric_limits<std::int64_t>::max();
  return ns;
}

std::int64_t unix_ns(const struct timespec &time) {
  std::int64_t ns = 0;
  if (__builtin_add_overflow(saturating_ns(time.tv_sec), std::int64_t{time.tv_nsec}, &ns))
    return std::numeric_limits<std::int64_t>::max(); // only a positive tv_nsec can overflow
  return ns;
}

std::int64_t unix_now_ns() {
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return unix_ns(now);
}

std::string make_private_directories(const fs::path &directory) {
  auto make = [&directory] { return ::mkdir(directory.c_str(), 0700) == 0 ? 0 : errno; };
  int error = make();
  fs::path parent = directory.parent_path();
  if (error == ENOENT && !parent.empty() && parent != directory) {
    if (std::string problem = make_private_directories(parent); !problem.empty())
      return problem;
    error = make();
  }
  if (error == 0 || error == EEXIST)
    return {};
  return "create directory " + directory.string() + ": " + std::strerror(error);
}

PrivateFile read_private_file(const fs::path &path) {
  PrivateFile file;
  auto refuse = [&file](std::string problem) {
    file.problem = std::move(problem);
    return std::move(file);
  };
  UniqueFd directory(::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!directory) {
    // No directory, or a file where a directory of the path should be: there is no entry to
    // reject. Writing will report the path once, if it is really unusable.
    file.missing = errno == ENOENT || errno == ENOTDIR;
    if (file.missing)
      return file;
    return refuse("cannot open its directory: " + errno_text());
  }
  struct stat status {};
  if (::fstat(directory.get(), &status) != 0)
    return refuse("cannot stat its directory: " + errno_text());
  if (std::string reason = untrusted_reason(status); !reason.empty())
    return refuse("its directory is " + reason);

  // O_NONBLOCK: a FIFO planted there must not hang the open; fstat rejects it below.
  UniqueFd fd(::openat(directory.get(), path.filename().c_str(),
                       O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    file.missing = errno == ENOENT;
    if (file.missing)
      return file;
    return refuse(errno == ELOOP ? "is a symbolic link" : "cannot open: " + errno_text());
  }
  if (::fstat(fd.get(), &status) != 0)
    return refuse("cannot stat: " + errno_text());
  if (!S_ISREG(status.st_mode))
    return refuse("not a regular file");
  if (std::string reason = untrusted_reason(status); !reason.empty())
    return refuse("file is " + reason);

  file.mtime_ns = unix_ns(status.st_mtim);
  file.bytes.resize(static_cast<std::size_t>(status.st_size));
  std::size_t done = 0;
  while (done < file.bytes.size()) {
    ssize_t got = ::read(fd.get(), file.bytes.data() + done, file.bytes.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return refuse("cannot read: " + errno_text());
    if (got == 0)
      break; // shorter than fstat said: the caller's format check reports the truncation
    done += static_cast<std::size_t>(got);
  }
  file.bytes.resize(done);
  return file;
}

std::string remove_private_path(const fs::path &path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT)
    return {};
  if (errno != EISDIR)
    return "remove " + path.string() + ": " + errno_text();
  struct stat status {};
  const fs::path directory = path.parent_path().empty() ? "." : path.parent_path();
  if (::lstat(directory.c_str(), &status) != 0)
    return "stat " + directory.string() + ": " + errno_text();
  if (std::string reason = untrusted_reason(status); !reason.empty())
    return "not removing the directory " + path.string() + ": its directory is " + reason;
  std::error_code error;
  fs::remove_all(path, error); // does not follow symbolic links inside the tree
  return error ? "remove " + path.string() + ": " + error.message() : std::string();
}

void publish_private_file(const fs::path &path, std::span<const std::byte> bytes,
                          std::string_view temp_stem, std::string_view what, Placement placement) {
  PrivateFileWriter file(path, temp_stem, what, placement);
  file.append(bytes);
  file.publish();
}

PrivateFileWriter::PrivateFileWriter(fs::path path, std::string_view temp_stem,
                                     std::string_view what, Placement placement)
    : path_(std::move(path)), what_(what) {
  try {
    const fs::path directory_path = path_.parent_path().empty() ? "." : path_.parent_path();
    if (placement == Placement::private_directory)
      if (std::string problem = make_private_directories(directory_path); !problem.empty())
        fail(problem);
    directory_ = ::open(directory_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (directory_ < 0)
      fail("open directory: " + errno_text());
    // A reader would refuse everything in such a directory: say so once instead of writing
    // forever.
    struct stat status {};
    if (::fstat(directory_, &status) != 0)
      fail("stat directory: " + errno_text());
    if (placement == Placement::private_directory)
      if (std::string reason = untrusted_reason(status); !reason.empty())
        fail("its directory is " + reason + ", so entries in it are not loaded");
    const std::string temp_name = unique_temp_name(temp_stem);
    file_ = ::openat(directory_, temp_name.c_str(),
                     O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (file_ < 0)
      fail("create " + temp_name + ": " + errno_text());
    temp_name_ = temp_name;
  } catch (...) {
    discard();
    throw;
  }
}

PrivateFileWriter::~PrivateFileWriter() { discard(); }

void PrivateFileWriter::discard() noexcept {
  if (file_ >= 0)
    ::close(std::exchange(file_, -1));
  if (!temp_name_.empty()) // unpublished: nothing half-written stays behind
    ::unlinkat(directory_, std::exchange(temp_name_, std::string()).c_str(), 0);
  if (directory_ >= 0)
    ::close(std::exchange(directory_, -1));
}

void PrivateFileWriter::fail(const std::string &step) const {
  throw Error(Errc::cache_io, "cannot write " + what_ + " " + path_.string() + ": " + step);
}

void PrivateFileWriter::append(std::span<const std::byte> bytes) {
  if (!write_all(file_, bytes))
    fail("write: " + errno_text());
}

void PrivateFileWriter::overwrite(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (::pwrite(file_, bytes.data(), bytes.size(), static_cast<off_t>(offset)) !=
      static_cast<ssize_t>(bytes.size()))
    fail("write: " + errno_text());
}

void PrivateFileWriter::read_back(
    const std::function<void(std::span<const std::byte>)> &visit) const {
  std::vector<std::byte> buffer(std::size_t{1} << 20);
  for (off_t at = 0;;) {
    const ssize_t got = ::pread(file_, buffer.data(), buffer.size(), at);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      fail("read back: " + errno_text());
    if (got == 0)
      return;
    visit(std::span(buffer).first(static_cast<std::size_t>(got)));
    at += got;
  }
}

void PrivateFileWriter::publish() {
  // The name appears only once the whole file is written and closed, so no reader ever sees a
  // partial entry under it (PyTorch #132756 renamed before closing and served truncated cubins).
  // No fsync: after a power loss a file may hold less than was written, but every read verifies
  // the checksum, so such an entry is a miss that gets rewritten, never a wrong binary, and the
  // fsyncs would cost every compile a disk flush (BENCHMARKS.md, "Evidence behind the code's
  // choices").
  if (::close(std::exchange(file_, -1)) != 0)
    fail("close: " + errno_text());
  if (::renameat(directory_, temp_name_.c_str(), directory_, path_.filename().c_str()) != 0)
    fail("rename: " + errno_text());
  temp_name_.clear();
}

} // namespace kjit::cache

#include "kjit/input_file.hpp"

#include "kjit/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kjit {

namespace {

// What a file that is not a regular one is, for the error.
std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

std::string size_text(std::size_t bytes) {
  if (bytes % (std::size_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

class Descriptor {
public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;
  ~Descriptor() { ::close(fd_); }
  int get() const { return fd_; }

private:
  int fd_;
};

} // namespace

std::string read_input_file(const std::filesystem::path &path, std::string_view what,
                            std::size_t max_bytes) {
  auto refused = [&](const std::string &why) {
    return Error(Errc::file_io,
                 "cannot read " + std::string(what) + " " + path.string() + ": " + why);
  };
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one. The
  // type is taken from the descriptor, not the path, so that what is checked is what is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    throw refused(std::strerror(errno));
  const Descriptor file(fd);
  struct stat status {};
  if (::fstat(file.get(), &status) != 0)
    throw refused(std::strerror(errno));
  if (!S_ISREG(status.st_mode))
    throw refused("it is " + kind_of(status.st_mode) + ", not a regular file");
  auto too_large = [&] { return refused("it is larger than " + size_text(max_bytes)); };
  if (static_cast<std::uintmax_t>(status.st_size) > max_bytes)
    throw too_large();
  std::string text;
  text.reserve(static_cast<std::size_t>(status.st_size));
  char chunk[65536];
  for (;;) {
    const ssize_t n = ::read(file.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      throw refused(std::strerror(errno));
    if (n == 0)
      return text;
    if (text.size() + static_cast<std::size_t>(n) > max_bytes) // it grew since fstat
      throw too_large();
    text.append(chunk, static_cast<std::size_t>(n));
  }
}

} // namespace kjit

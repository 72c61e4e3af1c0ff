#pragma once
// Files that only this user (or root) can change: the primitives under the disk tier, shared with
// the other state kjit keeps beside its entries (the compiler memo).
//
// Trust: a file is read only when it is a regular file and neither it nor the directory holding
// it is owned by another user or writable by group or others. Directories are created 0700;
// existing ones keep the mode their owner chose.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <time.h>
#include <vector>

namespace kjit::cache {

// Nanoseconds since the epoch, of a file time (struct stat's st_mtim) and of now, on the clock
// file times use. kjit's recency of entries is their mtime in these units.
// Both saturate: a time before 1678 or after 2262 (a file touched there, a crafted header) is
// the earliest or latest count an int64 holds, never a wrapped one.
std::int64_t unix_ns(const struct timespec &time);
std::int64_t unix_now_ns();
// `seconds` in nanoseconds, saturated likewise.
std::int64_t saturating_ns(std::int64_t seconds);

// Creates `directory` and its missing parents with mode 0700. Returns "" or what failed.
std::string make_private_directories(const std::filesystem::path &directory);

struct PrivateFile {
  bool missing = false;
  std::string problem; // set when a file is there but may not be read (or could not be)
  std::vector<std::byte> bytes;
  std::int64_t mtime_ns = 0; // the file's modification time, when it was read
};

// Reads `path` when it is trusted (above). No file, or no directory, is `missing`; a directory, a
// symbolic link, a FIFO or an untrusted file is a `problem`. Never throws for I/O.
PrivateFile read_private_file(const std::filesystem::path &path);

// Removes what is at `path`: a file, a symbolic link (not what it points to), or a directory tree
// planted where a file belongs, which a rename cannot replace. A directory tree is removed only
// when the directory holding it is trusted (above): in a directory others can write, they could
// swap its contents for links while it is being removed. Returns "" or what failed (no file is
// not a failure).
std::string remove_private_path(const std::filesystem::path &path);

// Where publish_private_file may put a file: in kjit's own tree (created 0700 as needed, refused
// when a reader would not trust it), or in a directory the user named (a file to carry
// elsewhere, such as an exported archive, which is verified by its content when read).
enum class Placement { private_directory, existing_directory };

// Publishes `bytes` as `path` (mode 0600): a unique temp file ".<temp_stem>.tmp.<pid>.<random>.<n>"
// in the same directory, written, closed, then renamed over `path`, so that no reader ever sees
// part of it. Not fsynced: what kjit stores is verified when read, and losing it costs a
// recompile. Throws Error(cache_io) "cannot write <what> <path>: <step>: <errno text>", leaving
// no temp file.
void publish_private_file(const std::filesystem::path &path, std::span<const std::byte> bytes,
                          std::string_view temp_stem, std::string_view what,
                          Placement placement = Placement::private_directory);

// publish_private_file for a file written piece by piece (an archive larger than memory): the
// constructor creates the temp file, publish() renames it over `path`; destroyed unpublished, it
// removes the temp file. Every method throws Error(cache_io) as publish_private_file does.
class PrivateFileWriter {
public:
  PrivateFileWriter(std::filesystem::path path, std::string_view temp_stem, std::string_view what,
                    Placement placement = Placement::private_directory);
  ~PrivateFileWriter();
  PrivateFileWriter(const PrivateFileWriter &) = delete;
  PrivateFileWriter &operator=(const PrivateFileWriter &) = delete;

  void append(std::span<const std::byte> bytes);
  // Replaces bytes already appended, at `offset`: a field known only once the rest is written.
  void overwrite(std::uint64_t offset, std::span<const std::byte> bytes);
  // Calls `visit` with every byte written so far, in order, a bounded piece at a time.
  void read_back(const std::function<void(std::span<const std::byte>)> &visit) const;
  void publish();

private:
  [[noreturn]] void fail(const std::string &step) const;
  void discard() noexcept; // closes, and removes the temp file unless published

  std::filesystem::path path_;
  std::string what_;
  std::string temp_name_;
  int directory_ = -1;
  int file_ = -1;
};

} // namespace kjit::cache

#pragma once
// Reading a file a user named (a --source, a set, a shapes file, a tuning table): a regular file
// only, bounded in size, and every failure one line naming the file and the reason. A directory,
// a FIFO or a device is refused before a byte is read: none of them can hang or exhaust memory.
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace kjit {

// The most bytes read_input_file reads. Sources, sets and tuning tables are kilobytes to a few
// megabytes; a larger file is refused rather than read into memory.
inline constexpr std::size_t kMaxInputFileBytes = std::size_t{64} << 20; // 64 MiB

// The whole file at `path`, which must be a regular file of at most `max_bytes`. Throws
// Error(file_io) "cannot read <what> <path>: <reason>", the reason being the system's (errno text)
// or what the file is instead ("a directory", "a FIFO", "larger than 64 MiB").
std::string read_input_file(const std::filesystem::path &path, std::string_view what,
                            std::size_t max_bytes = kMaxInputFileBytes);

} // namespace kjit

#pragma once
// Whole-file reads and writes for tests that inspect or damage cache entries.
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <vector>

namespace kjit::testing {

inline std::vector<std::byte> read_file_bytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
  // Not memcpy: an empty file's data() is null, which memcpy may not be given (UBSan).
  const auto *first = reinterpret_cast<const std::byte *>(chars.data());
  return {first, first + chars.size()};
}

// The bytes of `text`, for values written through byte interfaces.
inline std::vector<std::byte> bytes_of(std::string_view text) {
  const auto *first = reinterpret_cast<const std::byte *>(text.data());
  return {first, first + text.size()};
}

inline void write_file_bytes(const std::filesystem::path &path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// The permission bits of `path` itself (a link is not followed); ~0u when it cannot be read.
inline unsigned mode_of(const std::filesystem::path &path) {
  struct stat status {};
  return ::lstat(path.c_str(), &status) == 0 ? status.st_mode & 07777 : ~0u;
}

// Every file and directory under `root`, relative to it.
inline std::set<std::string> tree(const std::filesystem::path &root) {
  std::set<std::string> paths;
  for (const auto &item : std::filesystem::recursive_directory_iterator(root))
    paths.insert(std::filesystem::relative(item.path(), root).string());
  return paths;
}

} // namespace kjit::testing

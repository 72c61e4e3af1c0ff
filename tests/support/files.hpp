#pragma once
// Whole-file reads and writes for tests that inspect or damage cache entries.
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace kjit::testing {

inline std::vector<std::byte> read_file_bytes(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

inline void write_file_bytes(const std::filesystem::path &path,
                             const std::vector<std::byte> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

} // namespace kjit::testing

#pragma once
// What the cache tests share: fixed key inputs (also used by the key printer helper), sample
// entries, a scratch directory and raw file access.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/key.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace kjit::cache::testing {

namespace fs = std::filesystem;

inline constexpr const char *kTarget = "gfx90a:sramecc+:xnack-";

// A realistic field list whose key is pinned in key_test.cpp and printed by key_printer.cpp.
inline std::vector<KeyField> golden_key_fields() {
  return {{"format", "1"},
          {"template", "scale"},
          {"source", "sha256:0123"},
          {"param:T", "float"},
          {"options", "-O3 -ffast-math"},
          {"target", kTarget},
          {"compiler", "hiprtc 5.2.21153"}};
}

// Code bytes that depend on their length only, so a reader can check any entry it sees.
inline std::vector<std::byte> sample_code(std::size_t size) {
  std::vector<std::byte> code(size);
  for (std::size_t i = 0; i < size; ++i)
    code[i] = static_cast<std::byte>((i * 31 + size) & 0xFF);
  return code;
}

// A valid entry whose key is computed from its key inputs, as the runtime would write it.
inline Entry sample_entry(const std::string &seed, const std::string &target = kTarget,
                          std::size_t code_size = 64) {
  KeyBuilder builder;
  builder.add("template", "scale").add("seed", seed).add("target", target);
  Entry entry;
  entry.header.key = builder.finish();
  entry.header.target = target;
  entry.header.template_name = "scale";
  entry.header.parameters = {{"T", "float"}, {"N", 256}};
  entry.header.key_inputs = builder.fields();
  entry.header.kernels = {{"scale<float, 256>", "_Z5scaleIfLi256EEvPT_S1_i"}};
  entry.header.compiler = "hiprtc 5.2.21153";
  entry.header.created_unix = 1700000000;
  entry.header.compile_ms = 373.25;
  entry.code = sample_code(code_size);
  return entry;
}

// A fresh directory, removed with everything in it when the test ends.
class ScratchDir {
public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "kjit-cache-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDir() {
    // Tests take permissions away; give them back so that everything can be removed.
    std::error_code ignored;
    for (auto it = fs::recursive_directory_iterator(path_, ignored);
         it != fs::recursive_directory_iterator(); it.increment(ignored))
      if (it->is_directory(ignored) && !it->is_symlink(ignored))
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir &) = delete;
  ScratchDir &operator=(const ScratchDir &) = delete;

  const fs::path &path() const { return path_; }

private:
  fs::path path_;
};

inline std::vector<std::byte> read_bytes(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto *bytes = reinterpret_cast<const std::byte *>(chars.data());
  return {bytes, bytes + chars.size()};
}

inline void write_bytes(const fs::path &path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

} // namespace kjit::cache::testing

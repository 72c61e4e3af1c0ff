// libFuzzer target for the archive reader (`kjit cache import`): any bytes are either an archive
// or one Error(bad_archive), never a crash, another exception, an allocation sized by a crafted
// length, or undefined behaviour (the sanitizers check those). What is accepted must import as
// read: every entry it counted is written or already present. Each input is also read with its
// last 16 bytes replaced by its checksum (sealed.hpp), so that mutations reach the framing and the
// entries behind it.
#include "kjit/cache/archive.hpp"
#include "kjit/error.hpp"
#include "sealed.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "archive fuzzer: %s\n", what);
  std::abort();
}

// A private scratch directory for the process (in TMPDIR, default /tmp), removed at its exit: the
// archive under test and the store it imports to.
const fs::path &scratch() {
  struct Directory {
    fs::path path;
    ~Directory() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  };
  static const Directory directory = [] {
    std::string pattern = (fs::temp_directory_path() / "kjit-archive-fuzz-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      fail("mkdtemp failed");
    return Directory{pattern};
  }();
  return directory.path;
}

void check(std::span<const std::byte> bytes) {
  using namespace kjit::cache;
  const fs::path archive = scratch() / "input.kjitarc", root = scratch() / "store";
  std::ofstream(archive, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char *>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  const DiskStore store(root, Access::read_write); // empty: emptied after every import below
  ArchiveContent content;
  try {
    content = read_archive(store, archive);
  } catch (const kjit::Error &error) {
    if (error.code() != kjit::Errc::bad_archive)
      fail("read_archive threw another error than bad_archive");
    return;
  }
  const ArchiveSummary imported = import_entries(store, content);
  fs::remove_all(root);
  if (imported.entries + imported.skipped != content.entries)
    fail("an accepted archive did not import every entry it was read with");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  kjit::fuzz::check_as_is_and_sealed(std::span(reinterpret_cast<const std::byte *>(data), size),
                                     check);
  return 0;
}

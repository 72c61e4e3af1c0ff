// read_input_file: a regular file's bytes exactly, up to the bound given, and one Error(file_io)
// naming the file and the reason for anything else. The CLI tests (tests/runtime/
// cli_failures_test.cpp) run the same cases through every command that reads a file.
#include "kjit/error.hpp"
#include "kjit/input_file.hpp"
#include "tests/support/temp_dir.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>

namespace kjit {
namespace {

std::string refusal(const std::filesystem::path &path, std::size_t max_bytes = kMaxInputFileBytes) {
  try {
    read_input_file(path, "--test", max_bytes);
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::file_io);
    return error.summary();
  }
  return "read";
}

TEST(InputFile, ReadsARegularFileWholeUpToTheBound) {
  const testing::TempDir dir;
  const std::string bytes("four\0four", 9);
  std::ofstream(dir / "f", std::ios::binary) << bytes;
  EXPECT_EQ(read_input_file(dir / "f", "--test"), bytes);
  EXPECT_EQ(read_input_file(dir / "f", "--test", 9), bytes);
  EXPECT_EQ(refusal(dir / "f", 8),
            "cannot read --test " + (dir / "f").string() + ": it is larger than 8 bytes");
  std::ofstream(dir / "empty");
  EXPECT_EQ(read_input_file(dir / "empty", "--test"), "");
}

TEST(InputFile, RefusesWhatIsNotARegularFileBeforeReadingIt) {
  const testing::TempDir dir;
  EXPECT_EQ(refusal(dir.path()), "cannot read --test " + dir.path().string() +
                                     ": it is a directory, not a regular file");
  EXPECT_EQ(refusal("/dev/zero"),
            "cannot read --test /dev/zero: it is a character device, not a regular file");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(refusal(dir / "fifo"),
            "cannot read --test " + (dir / "fifo").string() + ": it is a FIFO, not a regular file");
  EXPECT_EQ(refusal(dir / "missing"),
            "cannot read --test " + (dir / "missing").string() + ": No such file or directory");
}

} // namespace
} // namespace kjit

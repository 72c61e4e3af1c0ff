// The compiler memo: what a later process keys by without loading the compiler, and only while
// the library files it was loaded from are unchanged.
#include "fake_compiler.hpp"
#include "runtime/src/compiler_memo.hpp"
#include "tests/support/scoped_environment.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>

namespace kjit {
namespace {

class CompilerMemoTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::ofstream(library) << "a compiler";
    compiler.library_files_ = {library.string()};
  }
  std::filesystem::path memo_file() const {
    for (const auto &entry : std::filesystem::directory_iterator(dir / "compilers"))
      return entry.path();
    return {};
  }

  testing::TempDir dir;
  std::filesystem::path library = dir / "libcompiler.so";
  testing::FakeCompiler compiler{"fake 2.1", {{"FAKE_OPTIONS", "-O3"}}};
  CompilerMemo memo{dir / "compilers"};
};

TEST_F(CompilerMemoTest, RemembersTheIdentityAndReadsTheEnvironmentNow) {
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);
  memo.write(compiler);
  {
    testing::ScopedEnvironment environment;
    environment.set("FAKE_OPTIONS", "-O1");
    const std::optional<CompilerIdentity> known = memo.read(Vendor::amd);
    ASSERT_TRUE(known.has_value());
    EXPECT_EQ(known->identity, "fake 2.1");
    EXPECT_EQ(known->environment,
              (std::vector<std::pair<std::string, std::string>>{{"FAKE_OPTIONS", "-O1"}}));
  }
  EXPECT_EQ(memo.read(Vendor::nvidia), std::nullopt) << "one memo per vendor";
  EXPECT_EQ(std::filesystem::status(dir / "compilers").permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
}

TEST_F(CompilerMemoTest, AChangedLibraryFileIsAMiss) {
  memo.write(compiler);
  ASSERT_TRUE(memo.read(Vendor::amd).has_value());
  std::ofstream(library, std::ios::app) << " upgraded";
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);
  std::filesystem::remove(library);
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);
}

// hiprtc's device library: a folder that appears (the package installed since) or whose files
// change makes the memo a miss, as a library file does.
TEST_F(CompilerMemoTest, ADataFolderThatAppearsOrChangesIsAMiss) {
  const std::filesystem::path bitcode = dir / "bitcode";
  compiler.data_files_ = {bitcode.string()};
  memo.write(compiler);
  ASSERT_TRUE(memo.read(Vendor::amd).has_value()) << "absent then, absent now";
  std::filesystem::create_directory(bitcode);
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);

  std::ofstream(bitcode / "ockl.bc") << "bitcode";
  compiler.data_files_ = {bitcode.string(), (bitcode / "ockl.bc").string()};
  memo.write(compiler);
  ASSERT_TRUE(memo.read(Vendor::amd).has_value());
  std::ofstream(bitcode / "ockl.bc", std::ios::app) << " changed";
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);
}

TEST_F(CompilerMemoTest, ACompilerWithoutLibraryFilesIsNotRemembered) {
  compiler.library_files_.clear();
  memo.write(compiler);
  EXPECT_FALSE(std::filesystem::exists(dir / "compilers"));
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);
}

TEST_F(CompilerMemoTest, ACorruptOrUntrustedMemoIsAMiss) {
  memo.write(compiler);
  const std::filesystem::path file = memo_file();
  ASSERT_FALSE(file.empty());
  ::chmod(file.c_str(), 0666);
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt) << "a memo others can write is not trusted";
  ::chmod(file.c_str(), 0600);
  ASSERT_TRUE(memo.read(Vendor::amd).has_value());
  for (const char *bad : {"", "{", "[]", R"({"identity": 7, "libraries": []})",
                          R"({"identity": "x", "environment_variables": [], "libraries": [{}]})"}) {
    std::ofstream(file, std::ios::trunc) << bad;
    EXPECT_EQ(memo.read(Vendor::amd), std::nullopt) << bad;
  }
}

TEST_F(CompilerMemoTest, AnUnwritableDirectoryLosesNothingButTheMemo) {
  std::ofstream(dir / "compilers") << "a file where the directory should be";
  EXPECT_NO_THROW(memo.write(compiler));
  EXPECT_EQ(memo.read(Vendor::amd), std::nullopt);
}

} // namespace
} // namespace kjit

#include "kjit/cache/signed_remote.hpp"

#include "kjit/error.hpp"
#include "tests/support/fake_remote.hpp"
#include "tests/support/files.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

namespace kjit::cache {
namespace {

using testing::bytes_of;

RecordKey record(std::string_view text) {
  return {kEntryRecord, "gfx90a", KeyBuilder().add("text", std::string(text)).finish()};
}

TEST(SignedRemote, ReadsBackWhatItSignedAndRefusesEverythingElse) {
  auto store = std::make_shared<testing::FakeRemote>();
  auto signer = signed_backend(store, "fleet secret");
  const RecordKey a = record("a"), b = record("b");
  ASSERT_TRUE(signer->put(a, bytes_of("code object a"), PutMode::only_if_absent).ok());
  auto back = signer->get(a);
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(back.value());
  EXPECT_EQ(*back.value(), bytes_of("code object a"));
  EXPECT_NE(*store->raw(a), bytes_of("code object a")) << "stored unsigned";

  auto refused = [&](const RecordKey &where, std::vector<std::byte> raw, std::string_view why) {
    store->set_raw(where, std::move(raw));
    auto got = signer->get(where);
    ASSERT_FALSE(got.ok()) << why;
    EXPECT_EQ(got.fault().failure, RemoteFailure::refused);
    EXPECT_NE(got.fault().message.find("signed"), std::string::npos) << got.fault().message;
  };
  const std::vector<std::byte> signed_a = *store->raw(a);
  refused(b, bytes_of("unsigned bytes"), "unsigned");
  refused(b, signed_a, "another record's signed value");
  std::vector<std::byte> altered = signed_a;
  altered.back() ^= std::byte{1};
  refused(a, altered, "altered");
  refused(a, std::vector<std::byte>(signed_a.begin(), signed_a.end() - 1), "cut short");
  refused(a, std::vector<std::byte>(signed_a.begin(), signed_a.begin() + 20), "tag cut short");
  auto other = signed_backend(store, "another secret");
  ASSERT_TRUE(other->put(b, bytes_of("b"), PutMode::overwrite).ok());
  EXPECT_FALSE(signer->get(b).ok()) << "signed with another secret";
  auto missing = signer->get(record("absent"));
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing.value());
}

class SecretFile : public ::testing::Test {
protected:
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kjit-secret-" + std::to_string(::getpid()));
  void write(std::string_view text, mode_t mode) {
    std::ofstream(path, std::ios::binary) << text;
    ::chmod(path.c_str(), mode);
  }
  void TearDown() override { std::filesystem::remove(path); }
};

TEST_F(SecretFile, ReadsAPrivateSecretWithoutItsNewline) {
  write("s3cret\n", 0600);
  EXPECT_EQ(read_remote_secret(path), "s3cret");
}

TEST_F(SecretFile, RefusesOneOthersCanReadAnEmptyOneAndAMissingOne) {
  for (mode_t mode : {0640, 0604, 0620}) {
    write("s3cret", mode);
    try {
      read_remote_secret(path);
      ADD_FAILURE() << "mode " << mode << " accepted";
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_config);
      EXPECT_NE(std::string(error.what()).find("chmod 600"), std::string::npos) << error.what();
    }
  }
  write("\n", 0600);
  EXPECT_THROW(read_remote_secret(path), Error);
  std::filesystem::remove(path);
  EXPECT_THROW(read_remote_secret(path), Error);
}

} // namespace
} // namespace kjit::cache

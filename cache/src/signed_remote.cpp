#include "kjit/cache/signed_remote.hpp"

#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "sha256.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>

namespace kjit::cache {

namespace {

constexpr std::string_view kTag = "kjit-hmac-sha256:";
constexpr std::size_t kMacBytes = 32;

std::string_view as_text(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char *>(bytes.data()), bytes.size()};
}

Sha256::Digest mac(const std::string &secret, const RecordKey &record,
                   std::span<const std::byte> value) {
  const std::string name = storage_name(record);
  return hmac_sha256(secret, {name, std::string_view("\0", 1), as_text(value)});
}

// Compares without an early exit, so that the time taken says nothing of where a forged tag
// first differs.
bool same_mac(const Sha256::Digest &expected, std::string_view found) {
  unsigned difference = 0;
  for (std::size_t i = 0; i < kMacBytes; ++i)
    difference |= expected[i] ^ static_cast<std::uint8_t>(found[i]);
  return difference == 0;
}

class SignedBackend final : public RemoteBackend {
public:
  SignedBackend(std::shared_ptr<RemoteBackend> inner, std::string secret)
      : inner_(std::move(inner)), secret_(std::move(secret)) {}

  RemoteResult<std::optional<std::vector<std::byte>>> get(const RecordKey &record) override {
    auto found = inner_->get(record);
    if (!found.ok() || !found.value())
      return found;
    std::vector<std::byte> &stored = *found.value();
    const std::string_view text = as_text(stored);
    const std::size_t header = kTag.size() + kMacBytes;
    if (text.size() < header || !text.starts_with(kTag))
      return refused(record, "unsigned");
    if (!same_mac(mac(secret_, record, std::span(stored).subspan(header)),
                  text.substr(kTag.size(), kMacBytes)))
      return refused(record, "wrongly signed");
    stored.erase(stored.begin(), stored.begin() + static_cast<std::ptrdiff_t>(header)); // no copy
    return found;
  }

  RemoteResult<PutOutcome> put(const RecordKey &record, std::span<const std::byte> value,
                               PutMode mode) override {
    const Sha256::Digest tag = mac(secret_, record, value);
    std::vector<std::byte> stored;
    stored.reserve(kTag.size() + kMacBytes + value.size());
    for (char c : kTag)
      stored.push_back(static_cast<std::byte>(c));
    for (std::uint8_t b : tag)
      stored.push_back(static_cast<std::byte>(b));
    stored.insert(stored.end(), value.begin(), value.end());
    return inner_->put(record, stored, mode);
  }

  RemoteResult<bool> remove(const RecordKey &record) override { return inner_->remove(record); }

private:
  RemoteFault refused(const RecordKey &record, std::string_view why) {
    RemoteFault fault{RemoteFailure::refused, "refused an " + std::string(why) + " value under " +
                                                  storage_name(record) +
                                                  " (KJIT_REMOTE_SECRET_FILE is set)"};
    log().debug("remote: {}", fault.message); // the caller reports it (the Runtime warns once)
    return fault;
  }

  std::shared_ptr<RemoteBackend> inner_;
  std::string secret_;
};

} // namespace

std::shared_ptr<RemoteBackend> signed_backend(std::shared_ptr<RemoteBackend> inner,
                                              std::string secret) {
  return std::make_shared<SignedBackend>(std::move(inner), std::move(secret));
}

std::string read_remote_secret(const std::filesystem::path &file) {
  const std::string named = "KJIT_REMOTE_SECRET_FILE '" + file.string() + "'";
  struct stat status {};
  if (::stat(file.c_str(), &status) != 0 || !S_ISREG(status.st_mode))
    throw Error(Errc::bad_config, named + ": not a readable regular file");
  if ((status.st_mode & (S_IRWXG | S_IRWXO)) != 0)
    throw Error(Errc::bad_config,
                named + ": group or others may read or write it; a fleet secret must be private "
                        "to its owner (chmod 600)");
  std::ifstream in(file, std::ios::binary);
  std::string secret((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw Error(Errc::bad_config, named + ": could not be read");
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r'))
    secret.pop_back();
  if (secret.empty())
    throw Error(Errc::bad_config, named + ": empty; a fleet secret needs some random bytes");
  return secret;
}

} // namespace kjit::cache

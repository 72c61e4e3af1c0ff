#include "summary_file.hpp"

#include "file_format.hpp"

#include <array>
#include <cstring>
#include <limits>

namespace kjit::cache {

namespace {

constexpr std::array<char, 8> magic = {'K', 'J', 'I', 'T', 'S', 'U', 'M', '\0'};
constexpr std::uint32_t summaries_version = 2; // 2: typed parameters
constexpr std::size_t prelude_size = 16;       // magic, version, count
using StringPairs = std::vector<std::pair<std::string, std::string>>;

void append_string(std::vector<std::byte> &out, const std::string &text) {
  format::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(text.size()));
  const auto *bytes = reinterpret_cast<const std::byte *>(text.data());
  out.insert(out.end(), bytes, bytes + text.size());
}

void append_pairs(std::vector<std::byte> &out, const StringPairs &pairs) {
  format::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(pairs.size()));
  for (const auto &[first, second] : pairs) {
    append_string(out, first);
    append_string(out, second);
  }
}

enum class ParameterKind : std::uint8_t { type = 0, integer = 1 };

void append_parameters(std::vector<std::byte> &out, const std::vector<EntryParameter> &parameters) {
  format::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(parameters.size()));
  for (const EntryParameter &parameter : parameters) {
    append_string(out, parameter.name);
    if (const std::int64_t *integer = std::get_if<std::int64_t>(&parameter.value)) {
      out.push_back(static_cast<std::byte>(ParameterKind::integer));
      format::append_le<std::uint64_t>(out, static_cast<std::uint64_t>(*integer));
    } else {
      out.push_back(static_cast<std::byte>(ParameterKind::type));
      append_string(out, std::get<std::string>(parameter.value));
    }
  }
}

// Reads the rows' fields in order; any read past the end makes it fail for good.
class Reader {
public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  bool failed() const { return failed_; }
  bool at_end() const { return at_ == bytes_.size(); }

  template <class Unsigned> Unsigned number() {
    if (!take(sizeof(Unsigned)))
      return 0;
    return format::load_le<Unsigned>(bytes_.data() + at_ - sizeof(Unsigned));
  }
  std::string string() {
    const std::size_t length = number<std::uint32_t>();
    if (!take(length))
      return {};
    return {reinterpret_cast<const char *>(bytes_.data() + at_ - length), length};
  }
  StringPairs pairs() {
    StringPairs out;
    // Each pair takes at least 8 bytes: a count larger than the room left is damage, not memory
    // to reserve.
    const std::size_t count = number<std::uint32_t>();
    if (count > (bytes_.size() - at_) / 8)
      failed_ = true;
    for (std::size_t i = 0; i < count && !failed_; ++i) {
      std::string first = string();
      out.emplace_back(std::move(first), string());
    }
    return out;
  }
  std::vector<EntryParameter> parameters() {
    std::vector<EntryParameter> out;
    // Each parameter takes at least 9 bytes (an empty name, a kind, an empty type).
    const std::size_t count = number<std::uint32_t>();
    if (count > (bytes_.size() - at_) / 9)
      failed_ = true;
    for (std::size_t i = 0; i < count && !failed_; ++i) {
      std::string name = string();
      const auto kind = static_cast<ParameterKind>(number<std::uint8_t>());
      if (kind == ParameterKind::integer)
        out.push_back({std::move(name), static_cast<std::int64_t>(number<std::uint64_t>())});
      else if (kind == ParameterKind::type)
        out.push_back({std::move(name), string()});
      else
        failed_ = true;
    }
    return out;
  }
  void digest(std::array<std::uint8_t, 32> &out) {
    if (take(out.size()))
      std::memcpy(out.data(), bytes_.data() + at_ - out.size(), out.size());
  }

private:
  bool take(std::size_t count) {
    if (failed_ || count > bytes_.size() - at_) {
      failed_ = true;
      return false;
    }
    at_ += count;
    return true;
  }
  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
  bool failed_ = false;
};

} // namespace

std::vector<std::byte> encode_summaries(std::span<const SummaryRow> rows) {
  std::vector<std::byte> out(magic.size());
  std::memcpy(out.data(), magic.data(), magic.size());
  format::append_le<std::uint32_t>(out, summaries_version);
  format::append_le<std::uint32_t>(out, static_cast<std::uint32_t>(rows.size()));
  for (const SummaryRow &row : rows) {
    const auto *digest = reinterpret_cast<const std::byte *>(row.key.digest.data());
    out.insert(out.end(), digest, digest + row.key.digest.size());
    format::append_le<std::uint64_t>(out, row.version.inode);
    format::append_le<std::uint64_t>(out, row.version.bytes);
    format::append_le<std::uint64_t>(out, static_cast<std::uint64_t>(row.version.change_ns));
    append_string(out, row.summary.template_name);
    append_parameters(out, row.summary.parameters);
    append_pairs(out, row.summary.kernels);
  }
  const format::Checksum checksum = format::checksum_of(out);
  out.insert(out.end(), checksum.begin(), checksum.end());
  return out;
}

std::optional<std::vector<SummaryRow>> decode_summaries(std::span<const std::byte> bytes) {
  if (bytes.size() < prelude_size + format::checksum_size ||
      std::memcmp(bytes.data(), magic.data(), magic.size()) != 0 ||
      format::load_le<std::uint32_t>(bytes.data() + 8) != summaries_version)
    return std::nullopt;
  const std::span<const std::byte> covered = bytes.first(bytes.size() - format::checksum_size);
  if (std::memcmp(format::checksum_of(covered).data(), bytes.data() + covered.size(),
                  format::checksum_size) != 0)
    return std::nullopt;
  const std::size_t count = format::load_le<std::uint32_t>(bytes.data() + 12);
  Reader reader(covered.subspan(prelude_size));
  std::vector<SummaryRow> rows;
  for (std::size_t i = 0; i < count && !reader.failed(); ++i) {
    SummaryRow row;
    reader.digest(row.key.digest);
    row.version.inode = reader.number<std::uint64_t>();
    row.version.bytes = reader.number<std::uint64_t>();
    row.version.change_ns = static_cast<std::int64_t>(reader.number<std::uint64_t>());
    row.summary.template_name = reader.string();
    row.summary.parameters = reader.parameters();
    row.summary.kernels = reader.pairs();
    rows.push_back(std::move(row));
  }
  if (reader.failed() || !reader.at_end())
    return std::nullopt;
  return rows;
}

} // namespace kjit::cache

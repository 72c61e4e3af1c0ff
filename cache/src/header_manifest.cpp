#include "kjit/cache/header_manifest.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/error.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

namespace kjit::cache {
namespace {

// The text form, one record a line; the path is last, so it may hold spaces:
//   kjit-header-manifest 1
//   base <key hex>
//   dirs <count>
//   result <key hex> <header count>
//   <dir> <digest hex | absent> <size> <mtime ns> <ctime ns> <inode> <path>
//   ...
//   end <XXH3-64 hex of every byte before this line>
constexpr std::string_view kMagic = "kjit-header-manifest 1";

std::string hex64(std::uint64_t value) {
  char text[17];
  auto [end, error] = std::to_chars(text, text + 16, value, 16);
  return std::string(16 - (end - text), '0') + std::string(text, end);
}

std::uint64_t checksum(std::string_view bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

bool is_hex_digest(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Splits `text` at its first space: the field before, and the rest after it.
std::pair<std::string_view, std::string_view> field(std::string_view text) {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos)
    return {text, {}};
  return {text.substr(0, space), text.substr(space + 1)};
}

template <typename Integer> bool parse(std::string_view text, Integer &value, int base = 10) {
  if (text.empty())
    return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return error == std::errc() && end == text.data() + text.size();
}

class Lines {
public:
  explicit Lines(std::string_view text) : text_(text) {}
  std::optional<std::string_view> next() {
    const std::size_t end = text_.find('\n', at_);
    if (end == std::string_view::npos)
      return std::nullopt;
    std::string_view line = text_.substr(at_, end - at_);
    at_ = end + 1;
    return line;
  }

private:
  std::string_view text_;
  std::size_t at_ = 0;
};

std::optional<RecordedHeader> parse_header(std::string_view line, std::uint32_t dirs) {
  RecordedHeader header;
  auto [dir, rest1] = field(line);
  auto [digest, rest2] = field(rest1);
  auto [size, rest3] = field(rest2);
  auto [mtime, rest4] = field(rest3);
  auto [ctime, rest5] = field(rest4);
  auto [inode, path] = field(rest5);
  if (!parse(dir, header.dir) || header.dir >= dirs || !parse(size, header.stamp.size) ||
      !parse(mtime, header.stamp.mtime_ns) || !parse(ctime, header.stamp.ctime_ns) ||
      !parse(inode, header.stamp.inode) || !valid_header_path(path))
    return std::nullopt;
  if (digest != "absent") {
    if (!is_hex_digest(digest))
      return std::nullopt;
    header.digest = std::string(digest);
  }
  header.path = std::string(path);
  return header;
}

std::string describe(const RecordedHeader &header) {
  return header.path + " (include directory " + std::to_string(header.dir) + ")";
}

} // namespace

bool valid_header_path(std::string_view path) {
  if (path.empty() || path.front() == '/')
    return false;
  if (std::any_of(path.begin(), path.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return false;
  for (std::size_t start = 0; start <= path.size();) {
    const std::size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..")
      return false;
    start = slash + 1;
  }
  return true;
}

void add_result(HeaderManifest &manifest, ManifestResult result) {
  std::erase_if(manifest.results, [&](const ManifestResult &old) { return old.key == result.key; });
  manifest.results.push_back(std::move(result));
  if (manifest.results.size() > kMaxManifestResults)
    manifest.results.erase(manifest.results.begin(), manifest.results.end() - kMaxManifestResults);
}

KeyField header_key_input(const RecordedHeader &header) {
  return {"include:" + std::to_string(header.dir) + ":" + header.path,
          header.digest.value_or("absent")};
}

bool keyed_by_headers(const EntryHeader &entry, const Key &base,
                      const std::vector<RecordedHeader> &headers) {
  const std::vector<KeyField> &fields = entry.key_inputs;
  if (fields.size() < headers.size())
    return false;
  const std::size_t split = fields.size() - headers.size();
  for (std::size_t i = 0; i < headers.size(); ++i)
    if (fields[split + i] != header_key_input(headers[i]))
      return false;
  return key_of({fields.begin(), fields.begin() + static_cast<std::ptrdiff_t>(split)}) == base &&
         key_of(fields) == entry.key;
}

std::string encode_manifest(const HeaderManifest &manifest) {
  std::string text(kMagic);
  text += "\nbase " + manifest.base.hex() + "\ndirs " + std::to_string(manifest.dirs) + '\n';
  for (const ManifestResult &result : manifest.results) {
    text += "result " + result.key.hex() + ' ' + std::to_string(result.headers.size()) + '\n';
    for (const RecordedHeader &header : result.headers) {
      text += std::to_string(header.dir);
      text += ' ';
      text += header.digest ? *header.digest : std::string("absent");
      for (std::int64_t number : {static_cast<std::int64_t>(header.stamp.size),
                                  header.stamp.mtime_ns, header.stamp.ctime_ns})
        text += ' ' + std::to_string(number);
      text += ' ' + std::to_string(header.stamp.inode) + ' ' + header.path + '\n';
    }
  }
  text += "end " + hex64(checksum(text)) + '\n';
  return text;
}

DecodedManifest decode_manifest(std::string_view bytes, const Key &base) {
  auto bad = [](std::string why) { return DecodedManifest{std::nullopt, std::move(why)}; };
  const std::size_t end_line = bytes.rfind("end ");
  std::uint64_t stored = 0;
  if (end_line == std::string_view::npos || (end_line != 0 && bytes[end_line - 1] != '\n') ||
      !bytes.ends_with('\n') ||
      !parse(bytes.substr(end_line + 4, bytes.size() - end_line - 5), stored, 16))
    return bad("it is cut short or not a header manifest");
  if (stored != checksum(bytes.substr(0, end_line)))
    return bad("its checksum does not match its content");
  Lines lines(bytes.substr(0, end_line));
  HeaderManifest manifest;
  auto line = lines.next();
  if (!line || *line != kMagic)
    return bad("it is not a header manifest of format 1");
  line = lines.next();
  auto [base_word, base_hex] =
      line ? field(*line) : std::pair<std::string_view, std::string_view>{};
  std::optional<Key> stored_base = Key::from_hex(base_hex);
  if (base_word != "base" || !stored_base)
    return bad("its base key line is malformed");
  if (*stored_base != base)
    return bad("it is the manifest of another variant (base key " + stored_base->hex() + ")");
  manifest.base = *stored_base;
  line = lines.next();
  auto [dirs_word, dirs_count] =
      line ? field(*line) : std::pair<std::string_view, std::string_view>{};
  if (dirs_word != "dirs" || !parse(dirs_count, manifest.dirs))
    return bad("its include directory count is malformed");
  while ((line = lines.next())) {
    auto [word, rest] = field(*line);
    auto [key_hex, count_text] = field(rest);
    std::optional<Key> key = Key::from_hex(key_hex);
    std::size_t count = 0;
    if (word != "result" || !key || !parse(count_text, count) || count > kMaxRecordedHeaders ||
        manifest.results.size() >= kMaxManifestResults)
      return bad("result " + std::to_string(manifest.results.size() + 1) + " is malformed");
    ManifestResult result{*key, {}};
    result.headers.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      line = lines.next();
      std::optional<RecordedHeader> header =
          line ? parse_header(*line, manifest.dirs) : std::nullopt;
      if (!header)
        return bad("header " + std::to_string(i + 1) + " of result " +
                   std::to_string(manifest.results.size() + 1) +
                   " is malformed or names a path outside its include directory");
      result.headers.push_back(std::move(*header));
    }
    manifest.results.push_back(std::move(result));
  }
  return {std::move(manifest), {}};
}

std::optional<HeaderState> read_header(const std::string &path, std::string *content_out) {
  const std::int64_t now = unix_now_ns();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return std::nullopt;
    throw Error(Errc::file_io, "cannot read header " + path + ": " + std::strerror(errno));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode))
    throw Error(Errc::file_io, "cannot read header " + path + ": it is not a regular file");
  std::string content(static_cast<std::size_t>(status.st_size), '\0');
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t got = ::read(fd, content.data() + done, content.size() - done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw Error(Errc::file_io, "cannot read header " + path + ": " + std::strerror(errno));
    if (got == 0) // shrunk while read: what was read is what the digest covers
      break;
    done += static_cast<std::size_t>(got);
  }
  content.resize(done);
  HeaderState state{{}, sha256_hex(content)};
  const std::int64_t ctime = unix_ns(status.st_ctim);
  if (ctime < now - kStampMinAgeNs && done == static_cast<std::size_t>(status.st_size))
    state.stamp = {static_cast<std::uint64_t>(status.st_size), unix_ns(status.st_mtim), ctime,
                   static_cast<std::uint64_t>(status.st_ino)};
  if (content_out != nullptr)
    *content_out = std::move(content);
  return state;
}

HeaderCheck check_headers(const std::vector<RecordedHeader> &headers,
                          const std::vector<std::string> &dirs) {
  HeaderCheck check;
  auto fail = [&check](std::string why) {
    check.valid = false;
    check.mismatch = std::move(why);
    check.headers.clear();
    return std::move(check);
  };
  // Each header is looked up relative to its directory, opened once: the directory's own path is
  // not resolved again for every header.
  std::vector<int> dir_fds(dirs.size(), -1);
  struct Closer {
    std::vector<int> &fds;
    ~Closer() {
      for (int fd : fds)
        if (fd >= 0)
          ::close(fd);
    }
  } closer{dir_fds};
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const RecordedHeader &header = headers[i];
    if (header.dir >= dirs.size())
      return fail("the include directories changed");
    int &dir_fd = dir_fds[header.dir];
    if (dir_fd < 0 &&
        (dir_fd = ::open(dirs[header.dir].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
      return fail("include directory " + dirs[header.dir] +
                  " cannot be opened: " + std::strerror(errno));
    struct stat status {};
    const bool exists = ::fstatat(dir_fd, header.path.c_str(), &status, 0) == 0;
    if (!exists && errno != ENOENT && errno != ENOTDIR)
      return fail(describe(header) + " cannot be read: " + std::strerror(errno));
    if (!header.digest) {
      if (exists)
        return fail(describe(header) + " was added");
      continue;
    }
    if (!exists)
      return fail(describe(header) + " vanished");
    const FileStamp now{static_cast<std::uint64_t>(status.st_size), unix_ns(status.st_mtim),
                        unix_ns(status.st_ctim), static_cast<std::uint64_t>(status.st_ino)};
    if (header.stamp.recorded() && header.stamp == now)
      continue;
    std::optional<HeaderState> state;
    try {
      state = read_header(dirs[header.dir] + '/' + header.path);
    } catch (const Error &error) {
      return fail(error.summary());
    }
    if (!state)
      return fail(describe(header) + " vanished");
    if (state->digest != *header.digest)
      return fail(describe(header) + " changed");
    ++check.rehashed;
    if (state->stamp.recorded() && state->stamp != header.stamp) {
      if (!check.restamp) // copied only when a stamp is to be written back
        check.headers = headers;
      check.headers[i].stamp = state->stamp;
      check.restamp = true;
    }
  }
  check.valid = true;
  return check;
}

} // namespace kjit::cache

#include "kjit/cache/remote_url.hpp"

#include "kjit/error.hpp"
#include "kjit/text.hpp"

#include <charconv>
#include <limits>
#include <optional>

namespace kjit::cache {

namespace {

constexpr std::string_view kForms =
    "accepted: space-separated redis://[user:password@]host[:port][/db] or "
    "redis+unix:///path[?db=N], each optionally followed by |read-only, |connect-timeout=MS, "
    "|operation-timeout=MS";

[[noreturn]] void refuse(std::string_view url, std::string_view why) {
  throw Error(Errc::bad_config, "KJIT_REMOTE_STORAGE: '" + std::string(url) +
                                    "': " + std::string(why) + " (" + std::string(kForms) + ")");
}

// A decimal in [low, high], or nullopt.
std::optional<long> number(std::string_view text, long low, long high) {
  long value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < low ||
      value > high)
    return std::nullopt;
  return value;
}

std::string percent_decoded(std::string_view text, std::string_view url) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    unsigned value = 0;
    if (i + 2 >= text.size())
      refuse(url, "a '%' not followed by two hex digits");
    auto [end, error] = std::from_chars(text.data() + i + 1, text.data() + i + 3, value, 16);
    if (error != std::errc() || end != text.data() + i + 3)
      refuse(url, "a '%' not followed by two hex digits");
    out += static_cast<char>(value);
    i += 2;
  }
  return out;
}

void parse_attribute(std::string_view attribute, std::string_view url, RemoteUrl &out) {
  constexpr long kMaxMs = 3'600'000;
  if (attribute == "read-only") {
    out.read_only = true;
    return;
  }
  const std::size_t equals = attribute.find('=');
  const std::string_view name = attribute.substr(0, equals);
  const std::string_view value =
      equals == std::string_view::npos ? std::string_view() : attribute.substr(equals + 1);
  if (name == "connect-timeout" || name == "operation-timeout") {
    std::optional<long> ms = number(value, 1, kMaxMs);
    if (!ms)
      refuse(url, std::string(name) + " wants milliseconds from 1 to 3600000");
    (name == "connect-timeout" ? out.timeouts.connect : out.timeouts.operation) =
        std::chrono::milliseconds(*ms);
    return;
  }
  refuse(url, "unknown attribute '" + std::string(attribute) + "'");
}

// "user:password@" (both parts optional) before the host.
void parse_credentials(std::string_view credentials, std::string_view url, RemoteUrl &out) {
  const std::size_t colon = credentials.find(':');
  if (colon == std::string_view::npos) {
    // A lone word is a password, as redis-cli and ccache read "redis://secret@host".
    out.password = percent_decoded(credentials, url);
    return;
  }
  out.user = percent_decoded(credentials.substr(0, colon), url);
  out.password = percent_decoded(credentials.substr(colon + 1), url);
  if (out.password.empty())
    refuse(url, "a user without a password");
}

} // namespace

RemoteUrl parse_remote_url(std::string_view text) {
  RemoteUrl out;
  std::string_view url = text.substr(0, text.find('|'));
  for (std::string_view rest = text.substr(url.size()); !rest.empty();) {
    rest.remove_prefix(1); // the '|'
    const std::string_view attribute = rest.substr(0, rest.find('|'));
    parse_attribute(attribute, text, out);
    rest.remove_prefix(attribute.size());
  }

  constexpr std::string_view tcp = "redis://", unix_socket = "redis+unix://", tls = "rediss://";
  if (url.starts_with(tls))
    refuse(text, "rediss:// (TLS) is not supported: Debian 12's hiredis 0.14 is built without "
                 "TLS; reach the server over a tunnel or a trusted network with redis://");
  std::string_view rest;
  if (url.starts_with(tcp)) {
    rest = url.substr(tcp.size());
  } else if (url.starts_with(unix_socket)) {
    out.transport = RemoteUrl::Transport::unix_socket;
    rest = url.substr(unix_socket.size());
  } else {
    refuse(text, "unknown scheme");
  }

  const std::size_t at = rest.rfind('@');
  if (at != std::string_view::npos) {
    parse_credentials(rest.substr(0, at), text, out);
    rest.remove_prefix(at + 1);
  }

  constexpr long kMaxDb = std::numeric_limits<int>::max();
  if (out.transport == RemoteUrl::Transport::unix_socket) {
    const std::size_t query = rest.find('?');
    out.socket_path = std::string(rest.substr(0, query));
    if (!out.socket_path.starts_with('/'))
      refuse(text, "redis+unix:// wants an absolute socket path (redis+unix:///run/redis.sock)");
    if (query != std::string_view::npos) {
      const std::string_view parameter = rest.substr(query + 1);
      std::optional<long> db =
          parameter.starts_with("db=") ? number(parameter.substr(3), 0, kMaxDb) : std::nullopt;
      if (!db)
        refuse(text, "the only query is ?db=N");
      out.db = static_cast<int>(*db);
    }
    return out;
  }

  const std::size_t slash = rest.find('/');
  if (slash != std::string_view::npos) {
    std::optional<long> db = number(rest.substr(slash + 1), 0, kMaxDb);
    if (!db)
      refuse(text, "the database after '/' must be a number");
    out.db = static_cast<int>(*db);
    rest = rest.substr(0, slash);
  }
  std::string_view port_text;
  if (rest.starts_with('[')) { // [IPv6]:port
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos || (close + 1 < rest.size() && rest[close + 1] != ':'))
      refuse(text, "a bracketed IPv6 address wants ']' then ':port' or nothing");
    if (close + 1 < rest.size())
      port_text = rest.substr(close + 2);
    rest = rest.substr(1, close - 1);
  } else if (const std::size_t colon = rest.find(':'); colon != std::string_view::npos) {
    if (rest.find(':', colon + 1) != std::string_view::npos)
      refuse(text, "an IPv6 address must be in brackets");
    port_text = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
    if (port_text.empty())
      refuse(text, "the port must be a number from 1 to 65535");
  }
  if (!port_text.empty()) {
    std::optional<long> port = number(port_text, 1, 65535);
    if (!port)
      refuse(text, "the port must be a number from 1 to 65535");
    out.port = static_cast<int>(*port);
  }
  if (rest.empty())
    refuse(text, "no host");
  out.host = std::string(rest);
  return out;
}

std::string RemoteUrl::description() const {
  std::string out =
      transport == Transport::tcp ? std::string("redis://") : std::string("redis+unix://");
  if (!user.empty())
    out += user + ":***@";
  else if (!password.empty())
    out += "***@";
  if (transport == Transport::tcp) {
    out += host.find(':') == std::string::npos ? host : "[" + host + "]";
    // Appended piece by piece: gcc 12 warns falsely (-Wrestrict) on ":" + std::to_string(...).
    out += ':';
    out += std::to_string(port);
    out += '/';
    out += std::to_string(db);
  } else {
    out += socket_path;
    if (db != 0)
      out += "?db=" + std::to_string(db);
  }
  return out;
}

std::vector<RemoteUrl> parse_remote_storage(std::string_view value) {
  std::vector<RemoteUrl> out;
  for (std::string_view url : words(value))
    out.push_back(parse_remote_url(url));
  return out;
}

} // namespace kjit::cache

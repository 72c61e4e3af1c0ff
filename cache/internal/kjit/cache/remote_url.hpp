#pragma once
// KJIT_REMOTE_STORAGE: which shared stores the remote tier uses. One URL or several separated by
// spaces, each with ccache-style attributes after '|':
//   redis://[user:password@]host[:port][/db]     (TCP; port 6379, db 0 by default)
//   redis+unix:///path/to/socket[?db=N]          (a Unix socket; user and password as above)
//   rediss://...                                 (refused: Debian 12's hiredis has no TLS)
//   attributes: read-only, connect-timeout=MS (default 100), operation-timeout=MS (default 1000)
// e.g. "redis://kjit:secret@10.0.0.5:6379/2|read-only|operation-timeout=500". User and password
// may be percent-encoded. Parsing is pure; a value that does not parse is Error(bad_config)
// naming the variable and the accepted forms.
#include "kjit/cache/remote.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kjit::cache {

struct RemoteUrl {
  enum class Transport { tcp, unix_socket };
  Transport transport = Transport::tcp;
  std::string host;        // tcp
  int port = 6379;         // tcp
  std::string socket_path; // unix_socket
  int db = 0;
  std::string user;     // empty: AUTH with the password alone (or no AUTH without one)
  std::string password; // empty: no AUTH
  bool read_only = false;
  RemoteTimeouts timeouts;

  // The URL with any password replaced by "***", for messages and listings.
  std::string description() const;
};

// One URL of the variable, attributes included.
RemoteUrl parse_remote_url(std::string_view url);
// Parses the whole variable; an empty or all-blank value is no remote.
std::vector<RemoteUrl> parse_remote_storage(std::string_view value);

} // namespace kjit::cache

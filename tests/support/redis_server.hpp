#pragma once
// A real redis-server (Debian's) for tests: started on a free loopback port of 127.0.0.1 and a
// Unix socket in a private directory, with a password for the default user and two ACL users
// (writer: every command on kjit's names; reader: reads only), and stopped (SIGKILL, then reaped)
// when the object goes, a failing test included. The tests stop, pause and kill it through it.
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kjit::testing {

class RedisServer {
public:
  static constexpr const char *kAdminPassword = "admin-pw";
  static constexpr const char *kWriterPassword = "writer-pw";
  static constexpr const char *kReaderPassword = "reader-pw";

  RedisServer() {
    char pattern[] = "/tmp/kjit-redis-XXXXXX";
    if (!::mkdtemp(pattern))
      throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    port_ = free_port();
    std::ofstream(dir_ / "redis.conf")
        << "port " << port_ << "\nbind 127.0.0.1\nprotected-mode yes\n"
        << "unixsocket " << socket_path() << "\nunixsocketperm 700\n"
        << "save \"\"\nappendonly no\ndir " << dir_.string() << "\n"
        << "enable-debug-command yes\nlogfile " << (dir_ / "redis.log").string() << "\n"
        << "user default on >" << kAdminPassword << " ~* &* +@all\n"
        << "user writer on >" << kWriterPassword << " ~kjit/* +@all\n"
        << "user reader on >" << kReaderPassword << " ~kjit/* -@all +get +scan +ping\n";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("redis-server", "redis-server", (dir_ / "redis.conf").c_str(), nullptr);
      ::_exit(127);
    }
    for (int tries = 0; tries < 200; ++tries) {
      if (auto admin = connect_admin())
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    stop_server();
    throw std::runtime_error("redis-server did not start on 127.0.0.1:" + std::to_string(port_));
  }
  ~RedisServer() {
    stop_server();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  RedisServer(const RedisServer &) = delete;
  RedisServer &operator=(const RedisServer &) = delete;

  int port() const { return port_; }
  std::string socket_path() const { return (dir_ / "redis.sock").string(); }
  // KJIT_REMOTE_STORAGE's URL for `user` ("writer", "reader"; "" for the default user).
  std::string url(std::string_view user = "writer", std::string_view attributes = "") const {
    std::string credentials = user.empty()       ? std::string(kAdminPassword) + "@"
                              : user == "reader" ? "reader:" + std::string(kReaderPassword) + "@"
                                                 : "writer:" + std::string(kWriterPassword) + "@";
    return "redis://" + credentials + "127.0.0.1:" + std::to_string(port_) +
           std::string(attributes);
  }

  void signal(int number) const { ::kill(pid_, number); }
  // SIGKILL and reap: the server is gone for good.
  void kill() { stop_server(); }

  // An admin connection for what the tests do behind kjit's back; nullptr when it cannot connect.
  struct Free {
    void operator()(redisContext *c) const { redisFree(c); }
  };
  using Connection = std::unique_ptr<redisContext, Free>;
  Connection connect_admin() const {
    Connection c(redisConnectWithTimeout("127.0.0.1", port_, {1, 0}));
    if (!c || c->err)
      return nullptr;
    redisSetTimeout(c.get(), {5, 0});
    auto *reply = static_cast<redisReply *>(redisCommand(c.get(), "AUTH %s", kAdminPassword));
    const bool ok = reply && reply->type == REDIS_REPLY_STATUS;
    if (reply)
      freeReplyObject(reply);
    return ok ? std::move(c) : nullptr;
  }
  // Runs one admin command; false when it failed.
  bool admin(const char *format, auto... args) const {
    Connection c = connect_admin();
    if (!c)
      return false;
    auto *reply = static_cast<redisReply *>(redisCommand(c.get(), format, args...));
    const bool ok = reply && reply->type != REDIS_REPLY_ERROR;
    if (reply)
      freeReplyObject(reply);
    return ok;
  }

  // The names matching `pattern` (KEYS: fine for a test's few names), on `connection`, which the
  // caller keeps open when it polls.
  static std::vector<std::string> keys(redisContext *connection, const std::string &pattern) {
    std::vector<std::string> names;
    auto *reply = static_cast<redisReply *>(redisCommand(connection, "KEYS %s", pattern.c_str()));
    if (reply && reply->type == REDIS_REPLY_ARRAY)
      for (std::size_t i = 0; i < reply->elements; ++i)
        names.emplace_back(reply->element[i]->str, reply->element[i]->len);
    if (reply)
      freeReplyObject(reply);
    return names;
  }
  std::vector<std::string> keys(const std::string &pattern) const {
    Connection c = connect_admin();
    return c ? keys(c.get(), pattern) : std::vector<std::string>{};
  }
  // The milliseconds `name` has left to live: -1 without an expiry, -2 when absent, -3 on error.
  long long pttl(const std::string &name) const {
    Connection c = connect_admin();
    auto *reply =
        c ? static_cast<redisReply *>(redisCommand(c.get(), "PTTL %s", name.c_str())) : nullptr;
    const long long left = reply && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -3;
    if (reply)
      freeReplyObject(reply);
    return left;
  }

private:
  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
      ::close(fd);
      throw std::runtime_error("no free loopback port");
    }
    ::close(fd);
    return ntohs(address.sin_port);
  }

  void stop_server() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::filesystem::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

} // namespace kjit::testing

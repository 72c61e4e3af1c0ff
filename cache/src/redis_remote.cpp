#include "kjit/cache/redis_remote.hpp"

#include "kjit/log.hpp"

#include <hiredis/hiredis.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <string_view>

namespace kjit::cache {

namespace {

using Clock = std::chrono::steady_clock;

struct ContextFree {
  void operator()(redisContext *context) const { redisFree(context); }
};
struct ReplyFree {
  void operator()(redisReply *reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

timeval to_timeval(std::chrono::milliseconds ms) {
  return {static_cast<time_t>(ms.count() / 1000),
          static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

// Compare-and-delete and compare-and-extend: atomic on the server, so a holder whose lease
// expired and was taken by another never deletes or extends the new holder's.
constexpr const char *kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
constexpr const char *kRenewScript = "if redis.call('get', KEYS[1]) == ARGV[1] then return "
                                     "redis.call('pexpire', KEYS[1], ARGV[2]) end return 0";

// 32 hex digits, unique per acquisition: drawn from a per-thread engine seeded once from the
// system's entropy. A std::random_device per token was most of what a lookup paid before it met
// the open circuit breaker of a dead remote (BENCHMARKS.md, "Evidence behind the code's
// choices").
std::string new_token() {
  thread_local std::mt19937_64 engine = [] {
    std::random_device entropy;
    std::seed_seq seed{entropy(), entropy(), entropy(), entropy(),
                       entropy(), entropy(), entropy(), entropy()};
    return std::mt19937_64(seed);
  }();
  static const char digits[] = "0123456789abcdef";
  std::string token;
  for (int word = 0; word < 2; ++word)
    for (std::uint64_t bits = engine(), i = 0; i < 16; ++i, bits >>= 4)
      token += digits[bits & 15];
  return token;
}

// The length a string reply ("$<length>\r\n<bytes>\r\n") announces, from the start of the
// reply's bytes: 0 for a reply of another type or a nil one, nullopt while its length line is
// incomplete.
std::optional<std::size_t> string_length(std::string_view reply) {
  if (reply.empty())
    return std::nullopt;
  if (reply[0] != '$' || reply.starts_with("$-"))
    return 0;
  const std::size_t end = reply.find("\r\n");
  if (end == std::string_view::npos)
    return std::nullopt;
  std::size_t length = 0;
  const auto [stop, error] = std::from_chars(reply.data() + 1, reply.data() + end, length);
  return error == std::errc() && stop == reply.data() + end ? length : SIZE_MAX;
}

// A reader buffer above this is dropped after its reply instead of kept for the next one.
constexpr std::size_t kLargeReply = std::size_t{1} << 20;

class RedisRemote final : public RemoteBackend, public RemoteLeases, public RemoteListing {
public:
  explicit RedisRemote(RemoteUrl url) : url_(std::move(url)) {}

  RemoteResult<std::optional<std::vector<std::byte>>> get(const RecordKey &record) override {
    const std::string name = storage_name(record);
    auto reply = command({"GET", name}, kMaxRemoteValueBytes);
    if (!reply.ok())
      return reply.fault();
    const redisReply *r = reply.value().get();
    if (r->type == REDIS_REPLY_NIL)
      return std::optional<std::vector<std::byte>>();
    if (r->type != REDIS_REPLY_STRING)
      return unexpected("GET", r);
    const auto *bytes = reinterpret_cast<const std::byte *>(r->str);
    return std::optional<std::vector<std::byte>>(std::vector<std::byte>(bytes, bytes + r->len));
  }

  RemoteResult<PutOutcome> put(const RecordKey &record, std::span<const std::byte> value,
                               PutMode mode) override {
    if (url_.read_only)
      return read_only("put");
    const std::string name = storage_name(record);
    const std::string_view bytes(reinterpret_cast<const char *>(value.data()), value.size());
    auto reply = mode == PutMode::only_if_absent ? command({"SET", name, bytes, "NX"})
                                                 : command({"SET", name, bytes});
    if (!reply.ok())
      return reply.fault();
    const redisReply *r = reply.value().get();
    if (r->type == REDIS_REPLY_NIL)
      return PutOutcome::already_present;
    if (r->type == REDIS_REPLY_STATUS)
      return PutOutcome::stored;
    return unexpected("SET", r);
  }

  RemoteResult<bool> remove(const RecordKey &record) override {
    if (url_.read_only)
      return read_only("remove");
    return integer_reply("DEL", {"DEL", storage_name(record)});
  }

  RemoteResult<std::optional<Token>> try_acquire(const RecordKey &record,
                                                 std::chrono::milliseconds ttl) override {
    Token token = new_token();
    auto reply =
        command({"SET", lease_name(record), token, "NX", "PX", std::to_string(ttl.count())});
    if (!reply.ok())
      return reply.fault();
    const redisReply *r = reply.value().get();
    if (r->type == REDIS_REPLY_NIL)
      return std::optional<Token>();
    if (r->type == REDIS_REPLY_STATUS)
      return std::optional<Token>(std::move(token));
    return unexpected("SET", r);
  }

  RemoteResult<bool> renew(const RecordKey &record, const Token &token,
                           std::chrono::milliseconds ttl) override {
    return integer_reply("EVAL", {"EVAL", kRenewScript, "1", lease_name(record), token,
                                  std::to_string(ttl.count())});
  }

  RemoteResult<bool> release(const RecordKey &record, const Token &token) override {
    return integer_reply("EVAL", {"EVAL", kReleaseScript, "1", lease_name(record), token});
  }

  RemoteResult<std::size_t> scan(RecordKind kind,
                                 const std::function<void(const RecordKey &)> &visit) override {
    const std::string pattern = storage_prefix(kind) + "*";
    std::string cursor = "0";
    std::size_t visits = 0;
    do {
      auto reply = command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
      if (!reply.ok())
        return reply.fault();
      const redisReply *r = reply.value().get();
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
          r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY)
        return unexpected("SCAN", r);
      cursor.assign(r->element[0]->str, r->element[0]->len);
      const redisReply *names = r->element[1];
      for (std::size_t i = 0; i < names->elements; ++i) {
        if (names->element[i]->type != REDIS_REPLY_STRING)
          continue;
        auto parsed = parse_storage_name({names->element[i]->str, names->element[i]->len}, kind);
        if (parsed) {
          visit(*parsed);
          ++visits;
        }
      }
    } while (cursor != "0");
    return visits;
  }

private:
  RemoteFault read_only(std::string_view what) {
    return {RemoteFailure::error, "read-only: no " + std::string(what)};
  }

  RemoteFault unexpected(std::string_view command, const redisReply *r) {
    return logged({RemoteFailure::error,
                   std::string(command) + ": an unexpected reply type " + std::to_string(r->type)},
                  false);
  }

  RemoteResult<bool> integer_reply(std::string_view name, std::vector<std::string_view> args) {
    auto reply = command(std::move(args));
    if (!reply.ok())
      return reply.fault();
    const redisReply *r = reply.value().get();
    if (r->type != REDIS_REPLY_INTEGER)
      return unexpected(name, r);
    return r->integer > 0;
  }

  // One command's reply, or the fault. A server error reply (NOPERM, WRONGPASS...) is a fault
  // too, but keeps the connection. A string reply longer than `max_string` is refused (below).
  RemoteResult<Reply> command(std::vector<std::string_view> args,
                              std::size_t max_string = SIZE_MAX) {
    std::lock_guard lock(mutex_);
    if (Clock::now() < skip_until_)
      return RemoteFault{RemoteFailure::error, std::string("skipped after repeated failures")};
    if (!context_) {
      if (auto fault = connect())
        return logged(std::move(*fault), true);
    }
    auto reply = send(args, max_string);
    if (!reply.ok())
      return logged(reply.fault(), reply.fault().failure != RemoteFailure::refused);
    // A denied command (NOPERM) leaves the server reachable: it does not trip the breaker, so a
    // read-only user's refused publish never costs the fleet its reads. WRONGTYPE is a record of
    // another type under the name (a list, a hash): a bad record, refused as a bad value is.
    if (reply.value()->type == REDIS_REPLY_ERROR) {
      const std::string_view text(reply.value()->str, reply.value()->len);
      return logged({text.starts_with("WRONGTYPE") ? RemoteFailure::refused : RemoteFailure::error,
                     std::string(args[0]) + ": " + std::string(text)},
                    false);
    }
    failures_ = 0;
    return reply;
  }

  // Under mutex_: a reply of any type, or a fault: an I/O one, or a string reply that announces
  // more than `max_string` bytes, refused from its length line before its bytes are read. Either
  // drops the connection (the rest of that reply is still on its way).
  RemoteResult<Reply> send(const std::vector<std::string_view> &args,
                           std::size_t max_string = SIZE_MAX) {
    std::vector<const char *> pointers;
    std::vector<std::size_t> lengths;
    for (std::string_view arg : args) {
      pointers.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    redisContext *c = context_.get();
    errno = 0;
    if (redisAppendCommandArgv(c, static_cast<int>(args.size()), pointers.data(), lengths.data()) !=
        REDIS_OK)
      return io_fault(args[0]);
    for (int written = 0; !written;)
      if (redisBufferWrite(c, &written) != REDIS_OK)
        return io_fault(args[0]);
    // The reply starts where the reader's unread bytes end now (none are left over: one command
    // at a time), and the reader only appends to its buffer until it is asked for the reply.
    const std::size_t start = c->reader->pos;
    bool length_checked = max_string == SIZE_MAX;
    void *reply = nullptr;
    while (!reply) {
      errno = 0;
      if (redisBufferRead(c) != REDIS_OK)
        return io_fault(args[0]);
      if (!length_checked) {
        const std::optional<std::size_t> announced =
            string_length({c->reader->buf + start, c->reader->len - start});
        if (!announced)
          continue; // the length line is not all here yet
        if (*announced > max_string) {
          context_.reset();
          return RemoteFault{RemoteFailure::refused,
                             std::string(args[0]) + ": a value of " + std::to_string(*announced) +
                                 " bytes, more than the " + std::to_string(max_string >> 20) +
                                 " MiB a remote value may hold"};
        }
        length_checked = true;
      }
      if (redisGetReplyFromReader(c, &reply) != REDIS_OK)
        return io_fault(args[0]);
    }
    Reply got(static_cast<redisReply *>(reply));
    // A long reply leaves the reader's buffer as large as the reply until the next one arrives:
    // a fresh reader gives that memory back now, before the caller copies the reply.
    if (got->type == REDIS_REPLY_STRING && got->len > kLargeReply) {
      redisReaderFree(c->reader);
      c->reader = redisReaderCreate();
    }
    return got;
  }

  // Under mutex_: what made a send fail (hiredis set errno and the context's errstr).
  RemoteFault io_fault(std::string_view command) {
    const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT;
    RemoteFault fault{timed_out ? RemoteFailure::timeout : RemoteFailure::error,
                      std::string(command) + ": " +
                          (timed_out ? std::string("no reply within the operation timeout")
                                     : std::string(context_->errstr))};
    context_.reset();
    return fault;
  }

  // Under mutex_: connects, authenticates and selects the database.
  std::optional<RemoteFault> connect() {
    errno = 0;
    const timeval connect_timeout = to_timeval(url_.timeouts.connect);
    std::unique_ptr<redisContext, ContextFree> context(
        url_.transport == RemoteUrl::Transport::tcp
            ? redisConnectWithTimeout(url_.host.c_str(), url_.port, connect_timeout)
            : redisConnectUnixWithTimeout(url_.socket_path.c_str(), connect_timeout));
    if (!context)
      return RemoteFault{RemoteFailure::error, std::string("out of memory")};
    if (context->err) {
      const bool timed_out = errno == ETIMEDOUT || errno == EINPROGRESS;
      return RemoteFault{timed_out ? RemoteFailure::timeout : RemoteFailure::error,
                         "cannot connect: " + std::string(context->errstr)};
    }
    if (redisSetTimeout(context.get(), to_timeval(url_.timeouts.operation)) != REDIS_OK)
      return RemoteFault{RemoteFailure::error, std::string("cannot set the timeout")};
    context_ = std::move(context);
    std::vector<std::vector<std::string_view>> setup;
    if (!url_.password.empty())
      setup.push_back(url_.user.empty()
                          ? std::vector<std::string_view>{"AUTH", url_.password}
                          : std::vector<std::string_view>{"AUTH", url_.user, url_.password});
    const std::string db = std::to_string(url_.db);
    if (url_.db != 0)
      setup.push_back({"SELECT", db});
    for (const auto &args : setup) {
      auto reply = send(args);
      if (!reply.ok())
        return reply.fault();
      if (reply.value()->type == REDIS_REPLY_ERROR) {
        // Never echo AUTH's arguments: the reply alone says what went wrong.
        RemoteFault fault{RemoteFailure::error,
                          std::string(args[0]) + ": " +
                              std::string(reply.value()->str, reply.value()->len)};
        context_.reset();
        return fault;
      }
    }
    return std::nullopt;
  }

  // Counts an unreachable or stalled server toward the breaker. Logs only at debug level: the
  // caller reports the fault, naming the remote (the Runtime's remote tier warns once per process,
  // the CLI's commands make it their error), so a fault is one warning, not one per layer.
  RemoteFault logged(RemoteFault fault, bool unreachable) {
    if (unreachable && ++failures_ >= kBreakerFailures) {
      skip_until_ = Clock::now() + kBreakerCooldown;
      failures_ = 0;
      context_.reset();
    }
    log().debug("remote cache {}: {}", url_.description(), fault.message);
    return fault;
  }

  const RemoteUrl url_;
  std::mutex mutex_;
  std::unique_ptr<redisContext, ContextFree> context_;
  int failures_ = 0;
  Clock::time_point skip_until_{};
};

} // namespace

RemoteStorage open_redis_remote(const RemoteUrl &url) {
  auto remote = std::make_shared<RedisRemote>(url);
  RemoteStorage storage;
  storage.description = url.description();
  storage.read_only = url.read_only;
  storage.backend = remote;
  if (!url.read_only)
    storage.leases = remote;
  storage.listing = remote;
  return storage;
}

RemoteStorage open_redis_url(std::string_view url) {
  return open_redis_remote(parse_remote_url(url));
}

} // namespace kjit::cache

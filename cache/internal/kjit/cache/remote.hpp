#pragma once
// The remote tier's contract: what a shared store (Redis, or the in-process fake the tests use)
// implements so that the tiered store can read, publish and list records in it, and so that a
// fleet compiles a missing variant once. Shaped after ccache's remote storage backends: a small
// backend whose operations return hit, miss and failure as values (never exceptions), a failure
// being a timeout or another error, under named timeouts.
//
// Three interfaces with one job each, so a backend implements what it can:
//   RemoteBackend  get, put (overwriting or only if absent), remove: the records themselves;
//   RemoteLeases   try_acquire, renew, release: who compiles a missing variant for the fleet;
//   RemoteListing  scan: every record of a kind (`kjit cache ls/verify/pull --remote`).
// A RemoteStorage bundles what one configured remote (one URL of KJIT_REMOTE_STORAGE) offers.
//
// Trust: a value read from a remote is untrusted input. A backend returns the bytes as stored;
// the tiered store verifies an entry exactly as it verifies a disk entry (checksum, the key in
// the header equal to the key asked for, the target) before anything is loaded. Signing (an
// HMAC over the value with a fleet secret) belongs below this interface: a backend, or a wrapper
// implementing RemoteBackend over another one, signs on put and checks on get, where an unsigned
// or wrongly signed value is a RemoteFailure::refused whose message says so. The tiered store
// never sees the signature. A backend bounds what a reader holds: kMaxRemoteValueBytes.
//
// Threads: every operation may be called from several threads at once; an implementation may
// serialise them on one connection. No operation may block past the timeouts it was configured
// with: a stalled server is a RemoteFailure::timeout, not a hang.
#include "kjit/cache/entry.hpp"
#include "kjit/cache/key.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kjit::cache {

// The timeouts of one remote, named as KJIT_REMOTE_STORAGE's attributes name them.
struct RemoteTimeouts {
  std::chrono::milliseconds connect{100};    // connect-timeout=MS
  std::chrono::milliseconds operation{1000}; // operation-timeout=MS: each command's round trip
};

// Why an operation did not complete. A miss is not a failure.
enum class RemoteFailure {
  error,   // refused connection, authentication or ACL denial, a bad reply...
  timeout, // the connect or operation timeout passed
  refused, // a value is there, but the backend will not return it (unsigned, wrongly signed,
           // longer than kMaxRemoteValueBytes, not a string): the record is bad, the remote fine
};
std::string_view to_string(RemoteFailure failure);

struct RemoteFault {
  RemoteFailure failure = RemoteFailure::error;
  std::string message; // one line, for the once-per-process warning; never holds a password
};

// A value or the fault that prevented it: what every remote operation returns.
template <typename T> class RemoteResult {
public:
  RemoteResult(T value) : state_(std::move(value)) {}
  RemoteResult(RemoteFault fault) : state_(std::move(fault)) {}

  bool ok() const { return state_.index() == 0; }
  // Only when ok().
  const T &value() const { return std::get<0>(state_); }
  T &value() { return std::get<0>(state_); }
  // Only when !ok().
  const RemoteFault &fault() const { return std::get<1>(state_); }

private:
  std::variant<T, RemoteFault> state_;
};

// A kind of record the store holds by key. Each kind has its own namespace and format version,
// so a format change of one kind never reads another's records or an older format's. Compiled
// entries are kEntryRecord; another kind (a tuning table, say) is one more RecordKind constant
// beside its format, stored and listed through the same interfaces with no change to them.
struct RecordKind {
  std::string_view name;        // [a-z_]+, part of the storage name
  std::uint32_t format_version; // of this kind's bytes
  bool operator==(const RecordKind &) const = default;
};
inline constexpr RecordKind kEntryRecord{"entry", kEntryFormatVersion};

// What a record is stored under: its kind, the canonical target id and the cache key.
struct RecordKey {
  RecordKind kind = kEntryRecord;
  std::string target;
  Key key;
  bool operator==(const RecordKey &) const = default;
};

// The name a record is stored under, the same for every backend so that any of them finds what
// another published: "kjit/<kind>/v<format>/<target>/<key hex>", e.g.
// "kjit/entry/v2/gfx90a:sramecc+:xnack-/3f...". Target ids hold no '/' (they are validated).
std::string storage_name(const RecordKey &record);
// The prefix every storage name of a kind (and format) starts with: "kjit/entry/v2/". What a
// listing matches (SCAN MATCH "<prefix>*").
std::string storage_prefix(RecordKind kind);
// The inverse of storage_name for a record of `kind`; nullopt for a name of another kind, format
// or shape (a listing meets names it did not write).
std::optional<RecordKey> parse_storage_name(std::string_view name, RecordKind kind);
// The name of the lease on a record: "kjit/lease/<kind>/v<format>/<target>/<key hex>". Kept
// apart from the records' prefix so that a listing never meets a lease.
std::string lease_name(const RecordKey &record);

// How a value read from a remote is verified before anything uses it (a Runtime's lookup, `kjit
// cache pull` and `verify --remote` alike): decoded as a disk entry is (checksum, the key and
// target in its header equal to the record's) and holding one kernel. `problem` says why not.
Decoded decode_record_entry(std::span<const std::byte> value, const RecordKey &record);

// The largest value a backend returns: far above any code object (a program of 16 GEMM
// instantiations is a few MiB), so that a value planted by a writer of the store costs a reader
// at most this much memory. A backend refuses a longer value (RemoteFailure::refused) from its
// announced length, before reading its bytes, so a value that grows after any earlier look is
// refused all the same.
inline constexpr std::size_t kMaxRemoteValueBytes = std::size_t{64} << 20;

enum class PutMode {
  overwrite,      // replaces a present value (push --force, rewriting a value found bad)
  only_if_absent, // a value already present is kept (SET NX): what a compile publishes
};
enum class PutOutcome { stored, already_present };

class RemoteBackend {
public:
  virtual ~RemoteBackend() = default;
  // The value stored under `record`, nullopt when there is none. A value longer than
  // kMaxRemoteValueBytes, or a name holding another type than a string, is refused.
  virtual RemoteResult<std::optional<std::vector<std::byte>>> get(const RecordKey &record) = 0;
  // Stores `value` under `record`. Under only_if_absent, already_present when a value was there
  // (it is left as it was). A read-only remote is a RemoteFailure::error.
  virtual RemoteResult<PutOutcome> put(const RecordKey &record, std::span<const std::byte> value,
                                       PutMode mode) = 0;
  // Removes the value under `record`: true when one was there.
  virtual RemoteResult<bool> remove(const RecordKey &record) = 0;
};

// A lease on one record: held by one process of the fleet while it compiles the record, so that
// the others wait for the record instead of compiling it too. A lease is a token set only if
// absent, with an expiry (ttl), so that a holder that dies loses it when the ttl passes.
class RemoteLeases {
public:
  using Token = std::string; // unguessable, unique per acquisition
  virtual ~RemoteLeases() = default;
  // The token when this caller now holds the lease, nullopt when another holder does.
  virtual RemoteResult<std::optional<Token>> try_acquire(const RecordKey &record,
                                                         std::chrono::milliseconds ttl) = 0;
  // Extends the lease to `ttl` from now if `token` still holds it: false when it was lost
  // (expired, and perhaps taken by another).
  virtual RemoteResult<bool> renew(const RecordKey &record, const Token &token,
                                   std::chrono::milliseconds ttl) = 0;
  // Deletes the lease if `token` still holds it (compare and delete, atomically): false when it
  // was lost already. Never deletes another holder's lease.
  virtual RemoteResult<bool> release(const RecordKey &record, const Token &token) = 0;
};

class RemoteListing {
public:
  virtual ~RemoteListing() = default;
  // Calls `visit` with every record of `kind` in the store, walking it incrementally (SCAN, never
  // KEYS). Names that do not parse as `kind` are skipped. As with SCAN, a record written or
  // removed during the walk may or may not be visited, and one may be visited twice. Returns the
  // number of visits.
  virtual RemoteResult<std::size_t> scan(RecordKind kind,
                                         const std::function<void(const RecordKey &)> &visit) = 0;
};

// One configured remote: one URL of KJIT_REMOTE_STORAGE.
struct RemoteStorage {
  std::string description; // the URL with any password elided, for messages
  bool read_only = false;  // the read-only attribute: never put, remove nor lease
  std::shared_ptr<RemoteBackend> backend;
  std::shared_ptr<RemoteLeases> leases;   // nullptr: no fleet single-flight through this remote
  std::shared_ptr<RemoteListing> listing; // nullptr: ls/verify/pull --remote refuse this remote
};

} // namespace kjit::cache

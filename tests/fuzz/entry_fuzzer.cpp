// libFuzzer target for the entry reader: any bytes on disk are either an entry or a problem, never
// a crash, an out-of-bounds read or undefined behaviour (the sanitizers check those). What is
// accepted must also mean one thing: the full reader and the header-only reader (`kjit cache ls`)
// agree, and an accepted entry survives a write and a read unchanged. Each input is also read
// with its last 16 bytes replaced by its checksum, so that mutations reach what lies behind the
// checksum (the lengths' agreement with the header, the header's fields) instead of stopping there.
#include "kjit/cache/entry.hpp"
#include "sealed.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

namespace {

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "entry fuzzer: %s\n", what);
  std::abort();
}

void check(std::span<const std::byte> bytes) {
  using namespace kjit::cache;
  const Decoded decoded = decode_entry(bytes);
  if (decoded.entry.has_value() == !decoded.problem.empty())
    fail("decode_entry gave both or neither an entry and a problem");

  std::string problem;
  std::size_t needed = 0;
  const std::optional<EntryHeader> header = decode_header(bytes, problem, &needed);
  if (header.has_value() == !problem.empty())
    fail("decode_header gave both or neither a header and a problem");
  if (!decoded.entry)
    return;

  if (!header || *header != decoded.entry->header)
    fail("decode_header disagrees with decode_entry on an accepted entry");
  const Decoded again = decode_entry(encode_entry(*decoded.entry));
  if (!again.entry || *again.entry != *decoded.entry)
    fail("an accepted entry does not survive encode_entry and decode_entry");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  kjit::fuzz::check_as_is_and_sealed(std::span(reinterpret_cast<const std::byte *>(data), size),
                                     check);
  return 0;
}

// libFuzzer target for the tuning record readers: a record file, a remote's value or an imported
// table is untrusted input, so any bytes are either records or an Error, never a crash, an
// out-of-bounds read, undefined behaviour (the sanitizers check those) or another exception. What
// is accepted must mean one thing: a record survives to_json and from_json unchanged, a table
// survives tuning_records_json and parse_tuning_records, and an accepted record's winner can be
// checked against its template (winner_problem) without throwing.
#include "kjit/error.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/library.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void fail(const char *what) {
  std::fprintf(stderr, "tuning record fuzzer: %s\n", what);
  std::abort();
}

// Runs `read`; an Error is a refusal (nullopt), any other exception a finding.
template <typename Read> auto accepted(Read read) -> std::optional<decltype(read())> {
  try {
    return read();
  } catch (const kjit::Error &) {
    return std::nullopt;
  } catch (const std::exception &error) {
    std::fprintf(stderr, "tuning record fuzzer: %s\n", error.what());
    fail("a reader threw something other than kjit::Error");
  }
}

void check_winner(const kjit::TuningRecord &record) {
  for (const kjit::Template &tmpl : kjit::templates::builtin())
    if (tmpl.name() == record.key.template_name)
      (void)kjit::winner_problem(tmpl, record); // "" or the reason; must not throw
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  using namespace kjit;
  const std::string_view text(reinterpret_cast<const char *>(data), size);

  if (const auto record = accepted([&] { return TuningRecord::from_json(text); })) {
    const auto again = accepted([&] { return TuningRecord::from_json(record->to_json()); });
    if (!again || *again != *record)
      fail("an accepted record does not survive to_json and from_json");
    check_winner(*record);
  }

  if (const auto records = accepted([&] { return parse_tuning_records(text, "input"); })) {
    const auto again =
        accepted([&] { return parse_tuning_records(tuning_records_json(*records), "again"); });
    if (!again || *again != *records)
      fail("an accepted table does not survive tuning_records_json and parse_tuning_records");
    for (const TuningRecord &record : *records)
      check_winner(record);
  }
  return 0;
}

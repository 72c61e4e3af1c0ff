#pragma once
// The exit status of every kjit command, decided here and nowhere else (README.md, "Exit
// status"), so that a script can tell what to do next: fix its input, find a GPU, free the disk,
// or report a failure.
#include "kjit/error.hpp"

namespace kjit::cli {

enum ExitStatus : int {
  exit_success = 0,
  exit_check_failed = 1, // the command ran and found a problem (cache verify, prebuild failures)
  exit_bad_input = 2,    // the command line, or a file or variable it names
  exit_no_gpu = 3,       // the command needs a GPU and none was found
  exit_io_failure = 4,   // the system refused a read or write kjit needed (disk full, permission)
  exit_internal = 5,     // kjit or what it loads failed: a compiler, a driver, a helper process
};

// The status a command ends with when it fails with an Error of `code`.
ExitStatus exit_status_of(Errc code);

} // namespace kjit::cli

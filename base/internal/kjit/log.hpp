#pragma once
// kjit's logger: a named spdlog logger ("kjit") writing to stderr, level from KJIT_LOG_LEVEL
// (trace, debug, info, warn (default), error, off). Created on first use.
#include <spdlog/logger.h>

#include <string>

namespace kjit {

spdlog::logger &log();

// True the first time this process asks about `subject` (a remote, a file, a target), for the
// warnings a lookup would otherwise repeat on every variant. Thread safe.
bool first_warning_about(const std::string &subject);

} // namespace kjit

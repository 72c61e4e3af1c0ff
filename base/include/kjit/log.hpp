#pragma once
// kjit's logger: a named spdlog logger ("kjit") writing to stderr, level from KJIT_LOG_LEVEL
// (trace, debug, info, warn (default), error, off). Created on first use.
#include <spdlog/logger.h>

namespace kjit {

spdlog::logger &log();

} // namespace kjit

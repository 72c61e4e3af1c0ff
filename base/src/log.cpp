#include "kjit/log.hpp"

#include <cstdlib>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string>

namespace kjit {

static spdlog::level::level_enum level_from_environment() {
  const char *text = std::getenv("KJIT_LOG_LEVEL");
  if (text == nullptr || *text == '\0')
    return spdlog::level::warn;
  auto level = spdlog::level::from_str(text);
  // spdlog maps an unknown name to "off"; a typo should not silence every warning.
  if (level == spdlog::level::off && std::string(text) != "off")
    return spdlog::level::warn;
  return level;
}

spdlog::logger &log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    // Not registered in spdlog's global registry: the host application may own a "kjit" logger.
    auto made = std::make_shared<spdlog::logger>(
        "kjit", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    made->set_pattern("kjit %^%l%$: %v");
    made->set_level(level_from_environment());
    return made;
  }();
  return *logger;
}

} // namespace kjit

#include "kjit/log.hpp"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <string>
#include <string_view>

namespace kjit {

namespace {

constexpr spdlog::level::level_enum default_level = spdlog::level::warn;

// The level KJIT_LOG_LEVEL names, or nothing when it names none (spdlog would read any unknown
// name as "off", and a typo should not silence every warning).
std::optional<spdlog::level::level_enum> level_named(std::string_view text) {
  const spdlog::level::level_enum level = spdlog::level::from_str(std::string(text));
  if (level == spdlog::level::off && text != "off")
    return std::nullopt;
  return level;
}

} // namespace

spdlog::logger &log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    // Not registered in spdlog's global registry: the host application may own a "kjit" logger.
    auto made = std::make_shared<spdlog::logger>(
        "kjit", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    made->set_pattern("kjit %^%l%$: %v");
    const char *text = std::getenv("KJIT_LOG_LEVEL");
    if (text == nullptr || *text == '\0') {
      made->set_level(default_level);
    } else if (const auto level = level_named(text)) {
      made->set_level(*level);
    } else {
      made->set_level(default_level);
      made->warn("KJIT_LOG_LEVEL='{}' is not valid; it accepts trace, debug, info, warn, error, "
                 "critical or off; logging at warn",
                 text);
    }
    return made;
  }();
  return *logger;
}

bool first_warning_about(const std::string &subject) {
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard lock(mutex);
  return warned.insert(subject).second;
}

} // namespace kjit

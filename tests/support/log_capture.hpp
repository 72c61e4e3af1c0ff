#pragma once
// Captures what kjit logs while it is alive, to count warnings.
#include "kjit/log.hpp"

#include <algorithm>
#include <memory>
#include <spdlog/sinks/ostream_sink.h>
#include <sstream>
#include <string>

namespace kjit::testing {

class LogCapture {
public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(text_)) {
    sink_->set_pattern("%l: %v");
    log().sinks().push_back(sink_);
  }
  ~LogCapture() {
    auto &sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  }
  LogCapture(const LogCapture &) = delete;
  LogCapture &operator=(const LogCapture &) = delete;

  std::string text() const { return text_.str(); }
  int warnings() const {
    const std::string all = text();
    int count = 0;
    for (std::size_t at = all.find("warning: "); at != std::string::npos;
         at = all.find("warning: ", at + 1))
      ++count;
    return count;
  }

private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
};

} // namespace kjit::testing

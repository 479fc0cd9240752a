#include "runtime/common/logging.h"

#include <unistd.h>

#include <atomic>
#include <string>

namespace hccltune {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kWarn};

// syslog priorities understood by journald when they prefix a stderr line.
int SyslogPriority(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return 3;
    case LogLevel::kWarn: return 4;
    case LogLevel::kInfo: return 6;
    default: return 7;
  }
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }
LogLevel GetLogLevel() { return g_level.load(std::memory_order_relaxed); }
bool LogEnabled(LogLevel level) { return level <= g_level.load(std::memory_order_relaxed); }

void LogLine(LogLevel level, absl::string_view message) {
  std::string line = absl::StrCat("<", SyslogPriority(level), ">hccl-tune[", ::getpid(), "] ", LogLevelName(level),
                                  ": ", message, "\n");
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace hccltune

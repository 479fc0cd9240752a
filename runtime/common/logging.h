// Minimal leveled logging to stderr, journald-friendly ("<level> hccl-tune[pid]: message"). The level comes
// from HCCL_TUNE_LOG_LEVEL via Environment and is set once with SetLogLevel().
//
// Thread-safety: SetLogLevel/LogEnabled use an atomic; Log() writes one line with a single write(2).
#pragma once

#include "absl/strings/str_cat.h"
#include "runtime/common/config.h"

namespace hccltune {

void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, absl::string_view message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrCat(args...));
}

}  // namespace hccltune

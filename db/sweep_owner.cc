// Who runs a sweep, as its journal row records it, and whether that process still exists (tuning_store.h).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "db/tuning_store.h"
#include "runtime/common/json_field.h"

namespace hccltune::db {
namespace {

using json = nlohmann::json;

std::string BootId() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

std::string PidNamespace() {
  char buf[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// /proc/PID/stat: the state letter and the start time (clock ticks after boot, field 22); false if no such process.
bool ProcessStat(long pid, char* state, unsigned long long* start) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return false;
  const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char* p = line.c_str() + close + 2;
  *state = *p;
  // Fields after the name: 3 state, 4 ppid, ... 22 starttime: skip 19 fields after the state.
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return false;
    ++p;
  }
  *start = std::strtoull(p, nullptr, 10);
  return true;
}

}  // namespace

std::string ThisProcessOwnerJson() {
  char state = 0;
  unsigned long long start = 0;
  const long pid = static_cast<long>(::getpid());
  (void)ProcessStat(pid, &state, &start);
  return json{{"boot_id", BootId()}, {"pid_ns", PidNamespace()}, {"pid", pid}, {"start", start}}.dump();
}

bool SweepOwnerGone(const Sweep& s) {
  const json params = json::parse(s.params_json, nullptr, false);
  if (params.is_discarded() || !params.is_object() || !params.contains("owner")) return false;
  const json& owner = params["owner"];
  if (!owner.is_object() || !owner.contains("pid") || !owner["pid"].is_number_integer()) return false;
  // Another machine, another boot or another pid namespace: its pid says nothing here.
  const std::string boot = BootId();
  if (boot.empty() || JsonOr(owner, "boot_id", "") != boot || JsonOr(owner, "pid_ns", "") != PidNamespace())
    return false;
  const long pid = owner["pid"].get<long>();
  if (pid <= 0) return false;
  char state = 0;
  unsigned long long start = 0;
  if (!ProcessStat(pid, &state, &start)) {
    // No /proc entry: gone, unless /proc cannot be read at all (then kill(0) decides).
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
  }
  if (state == 'Z' || state == 'X') return true;  // killed, not yet reaped by its parent
  return JsonOr(owner, "start", 0ULL) != 0 &&
         start != JsonOr(owner, "start", 0ULL);  // the pid now names another process
}

bool SweepInProgress(const Sweep& s, int64_t now_unix_ms) {
  constexpr int64_t kRunningHorizonMs = int64_t{6} * 3600 * 1000;
  return s.status == SweepStatus::kRunning && s.started_unix_ms > now_unix_ms - kRunningHorizonMs && !SweepOwnerGone(s);
}

}  // namespace hccltune::db

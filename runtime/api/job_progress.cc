#include "runtime/api/job_progress.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/flight_ring.h"
#include "runtime/common/logging.h"

namespace hccltune {

std::string JobIdFor(const Environment& env, uint64_t tag) {
  if (!env.launcher_job_id.empty()) return env.launcher_job_id;
  std::string store = env.store;
  if (store.empty() && !env.master_addr.empty() && env.master_port) {
    store = absl::StrCat(env.master_addr, ":", *env.master_port);
  }
  if (store.empty() && !env.launcher_master_addr.empty() && env.launcher_master_port) {
    store = absl::StrCat(env.launcher_master_addr, ":", *env.launcher_master_port);
  }
  const std::string hex = absl::StrCat(absl::Hex(tag, absl::kZeroPad16));
  return store.empty() ? absl::StrCat("comm:", hex) : absl::StrCat("store:", store, "#", hex);
}

CommProgress ReadProgress(const FlightRecorder* recorder, const std::string& name, uint64_t tag, int rank, int size) {
  CommProgress p;
  p.name = name;
  p.tag = tag;
  p.rank = rank;
  p.size = size;
  if (recorder == nullptr) {
    p.recorder_off = true;
    return p;
  }
  // Newest first: the last record begun, then the newest completed one.
  const std::vector<FlightRecord> records = recorder->ring().Snapshot();
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (p.last_started < 0) {
      p.last_started = it->op;
      p.started_collective = it->collective;
      p.started_bytes = it->bytes;
      p.in_call = it->state == FlightState::kStarted;
      p.blocked_since_ns = p.in_call ? it->blocked_ns : 0;
    }
    if (it->state == FlightState::kCompleted) {
      p.last_completed = it->op;
      p.completed_collective = it->collective;
      p.completed_bytes = it->bytes;
      break;
    }
  }
  return p;
}

FlightDumpText DumpForDaemon(const FlightRecorder* recorder, uint64_t tag, int rank) {
  FlightDumpText out;
  out.file_name = absl::StrCat("fr-", absl::Hex(tag, absl::kZeroPad16), "-r", rank, ".json");
  if (recorder == nullptr) {
    out.error = "the flight recorder is off (HCCL_TUNE_FR_ENTRIES=0)";
    return out;
  }
  auto local = recorder->Dump("request");
  if (local.ok()) Log(LogLevel::kInfo, "flight recorder dumped to ", *local, " (requested through hccl-tuned)");
  out.json = recorder->Json("request", "");
  return out;
}

}  // namespace hccltune

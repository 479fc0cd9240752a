// Output shared by `hccl-tune sweep`, `verify` and `report`: the winners table and an entry as JSON.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "db/tuning_store.h"
#include "nlohmann/json.hpp"
#include "rpc/remote_store.h"
#include "runtime/common/config.h"
#include "tuner/sweep/search.h"
#include "tuner/sweep/sweep.h"

namespace hccltune::cli {

// coll dtype bytes winner busbw time, runner-up and margin, margin over the built-in default.
void PrintEntriesTable(const std::vector<db::TunedEntry>& entries, std::FILE* out);
nlohmann::json EntryJson(const db::TunedEntry& e);

// Where a sweep through the daemon keeps its samples and progress when --journal is not given:
// $XDG_STATE_HOME/hccl-tune/sweeps.db, else ~/.local/state/hccl-tune/sweeps.db, else /tmp/hccl-tune-UID/sweeps.db
// (directories created).
absl::StatusOr<std::string> DefaultJournal(const Environment& env);
// `journal` when given (--journal), else DefaultJournal of the process environment.
absl::StatusOr<std::string> ResolveJournal(const std::string& journal);

// Sweep progress as people and machines read it: a bar on a terminal (stderr), a line per size otherwise, or
// JSON lines on stdout with --json ({"event":"progress","done","total","point","config","eta_s"}). Used for local
// sweeps and for sweeps relayed from hccl-tuned, so both look the same. Not thread-safe.
class ProgressPrinter {
 public:
  ProgressPrinter(bool json, bool plain);
  // A local sweep's progress; the ETA is extrapolated from the elapsed time.
  void operator()(const sweep::Progress& p);
  void Show(uint64_t done, uint64_t total, const std::string& point, const std::string& config, double eta_s);

 private:
  bool json_, tty_;
  absl::Time start_ = absl::Now();
  std::string last_where_;
};

// The node-quiet check before a sweep: load average and sweeps marked running in the journal
// (sweep::CheckNodeQuiet), plus, when the sweep goes through a daemon (`remote` set), the jobs reporting live
// timings to it within the last 30 s and a sweep the daemon runs other than `own_id`. Any of those refuses.
sweep::QuietCheck CheckQuiet(db::TuningStore* journal, rpc::RemoteTuningStore* remote, const std::string& own_id);

}  // namespace hccltune::cli

// Why a local job failed, told from what its spawning process saw of each rank (SpawnLocalRanks, spawn.h): how
// each rank ended, its report (rank_report.h) and, for a rank that had to be ended, its state at that moment.
//
// The verdict names the rank the others blamed, not merely the first process that exited: when one rank freezes,
// the others fail after HCCL_EXEC_TIMEOUT naming it and exit first, while it is still there.
//  1. The rank the reports blame most ("peer"), following chains of blame to their end (rank 2 waited for rank 0,
//     which waited for the frozen rank 1: both blame rank 1); a tie goes to the one blamed by the earliest failure.
//  2. Else a rank that died without a report (killed by a signal, or an exit status without a word).
//  3. Else a rank that never ended on its own (stopped, hung) and had to be ended.
//  4. Else the earliest failure (a rank's own error: a bad argument, a wrong result).
// The message says what became of that rank (killed by which signal; stopped, traced or blocked in the kernel and
// then ended with SIGTERM or SIGKILL), quotes its own report when it has one, and the first report that blamed
// it from what that rank saw itself (rather than relaying another rank's announcement, code ABORTED).
//
// Thread-safety: pure functions.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hccltune::bench {

struct RankReport {
  std::string code;  // absl status code name
  std::string message;
  std::optional<int> peer;  // the rank it blames
};

// Parses one line of the report channel; nullopt when it is not a report.
std::optional<RankReport> ParseRankReport(const std::string& line);

struct RankEnd {
  int rank = 0;
  pid_t pid = 0;
  int wait_status = 0;     // from waitpid
  int failure_order = -1;  // its place among the ranks that failed on their own (report or bad end); -1: never
  int signal_sent = 0;     // 0, or the last of SIGTERM / SIGKILL sent while it was still running
  char state = 0;          // its /proc state when the job was ended ('T', 't', 'D', 'R', 'S'...); 0: not ended
  std::optional<RankReport> report;
};

// The error for a failed job. REQUIRES: some rank failed (failure_order >= 0) or had to be ended.
absl::Status JobVerdict(const std::vector<RankEnd>& ranks, absl::Duration grace);

// "signal 9 (SIGKILL)".
std::string SignalName(int sig);

}  // namespace hccltune::bench

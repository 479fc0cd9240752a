// Spawns N local ranks of this executable with the rank environment set (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, and HCCL_TUNE_STORE pointing at a store server this process runs), waits for them, and ends a
// failed job.
//
// Names: each rank runs this executable by its path (so its comm name is "hccl-tune", not the "exe" of
// /proc/self/exe; /proc/self/exe itself only when the file at that path is no longer this executable, as after
// an upgrade in place) with argv[0] "hccl-tune/r<rank>", and names itself "hccl-tune/r<rank>" (rank_report.h).
// `ps -o comm`, `top` and `ss -p` show that name; `ps -o args` shows "hccl-tune/r1 --report-fd N bench --launched
// ...".
//
// Ending a failed job: once any rank has failed (exited non-zero, was killed, or reported a failure), the others
// get `grace` (HCCL_TUNE_KILL_GRACE) to end on their own, then SIGTERM (with SIGCONT, so a stopped rank acts on
// it), then SIGKILL once `grace` has passed again. Each rank dies with this process too (PR_SET_PDEATHSIG,
// SIGKILL), and a SIGTERM this process receives while it waits is passed on to the ranks (SIGKILL after `grace`).
// Every rank is reaped before this returns: nothing is left running.
//
// The error names the rank the others blamed and why (job_verdict.h), from each rank's report (rank_report.h),
// its end and, for a rank that had to be ended, its state then.
//
// Thread-safety: one call at a time per process; the calling thread must stay until it returns (the ranks'
// PR_SET_PDEATHSIG follows it).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hccltune::bench {

struct SpawnOptions {
  int ranks = 2;
  std::vector<std::string> args;               // argv for each child (without argv[0])
  absl::Duration timeout = absl::Minutes(30);  // absl::InfiniteDuration(): no deadline
  std::optional<absl::Duration> grace;         // nullopt: HCCL_TUNE_KILL_GRACE
};

// OK when every rank exited 0. Otherwise: InvalidArgument for a bad environment variable (before any process
// starts); Cancelled when the job was interrupted (every failed rank exited with status 130, or this process got
// SIGTERM); DeadlineExceeded after `timeout`; else Aborted with the verdict.
absl::Status SpawnLocalRanks(const SpawnOptions& opt);

}  // namespace hccltune::bench

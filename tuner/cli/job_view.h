// The CLI's side of hccl-tuned's job view (docs/TROUBLESHOOTING.md, "Running jobs"): GetJobs for `hccl-tune jobs`,
// and DumpJob for `hccl-tune doctor --job`, whose dumps are written as files for the dump doctor.
//
// Thread-safety: stateless functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hccltune/v1/tuner.pb.h"

namespace hccltune::cli {

// The daemon target `flag` names (empty: HCCL_TUNE_DAEMON, then discovery); FAILED_PRECONDITION when disabled.
absl::StatusOr<std::string> JobViewTarget(const std::string& flag);

// GetJobs from `target` (every job, or `job_id`), answered within `deadline`.
absl::StatusOr<v1::GetJobsResponse> GetJobs(const std::string& target, const std::string& job_id,
                                            absl::Duration deadline = absl::Seconds(10));

// The jobs as text: a block per job, a line per rank and communicator.
std::string FormatJobs(const v1::GetJobsResponse& jobs, const std::string& target);

// What DumpJob brought from each daemon: the files written (under `dir`) and one note per rank that sent none.
struct CollectedDumps {
  std::vector<std::string> files;
  std::vector<std::string> notes;  // "host rank 2: no heartbeat for 4s ..."
};
// Asks every daemon of `targets` at once (a thread each) for the dumps of job `job_id` (waiting up to `timeout` for
// the ranks) and writes each dump to `dir`/<its file name>. Errors name the daemon; among several, a daemon that
// does not know the job is a note, and a job none knows is NOT_FOUND naming it.
absl::StatusOr<CollectedDumps> CollectJobDumps(const std::vector<std::string>& targets, const std::string& job_id,
                                               absl::Duration timeout, const std::string& dir);

}  // namespace hccltune::cli

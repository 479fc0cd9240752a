// SweepRunner: hccl-tuned sweeps its own node (StartSweep / WatchSweep / CancelSweep). The daemon runs
// `hccl-tune sweep --json` (the binary of the same installation, or `sweep_command` from the config) as a child
// process in its own process group, reads its machine-readable progress from the child's stdout, and relays it
// to every watcher. The child stores its samples, progress and winners through this daemon (--daemon), exactly
// like a sweep started by hand, so a daemon-run sweep can be resumed by hand and vice versa.
//
// Contracts:
//  - One sweep at a time: Start while one runs is FailedPrecondition naming the running sweep's id.
//  - Cancel (and Shutdown) send SIGINT to the child's process group: the sweep stops cleanly (its row marked
//    cancelled, resumable, no table written); after `stop_grace` the group gets SIGKILL. The child is always
//    reaped, and the whole group is killed once the child has exited, so no rank process outlives it.
//  - A sweep that fails says why in its "failed" event (--json): when one of its ranks froze or died, the rank
//    the others blamed and what became of it (tuner/bench/spawn.h); that is the FAILED state's message, else
//    the sweep's last error line on stderr.
//  - The state of the last `keep_finished` sweeps stays queryable after they end (a late watcher sees the end
//    state); the newest is what WatchSweep with an empty id shows when none runs.
//  - Shutdown refuses new sweeps (Unavailable), stops the running one as Cancel does and waits for it; call it
//    while the gRPC server still serves, since the stopping sweep reports its cancelled state through it.
//
// Thread-safety: every method may be called concurrently; one supervising thread per running sweep.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "hccltune/v1/tuner.pb.h"

namespace hccltune::daemon {

namespace v1 = ::hccltune::v1;

struct SweepRunnerOptions {
  std::string command;        // the hccl-tune binary; "" = DefaultSweepCommand()
  std::string daemon_target;  // how the sweep reaches this daemon: "unix:/path" or "host:port"
  absl::Duration stop_grace = absl::Seconds(15);
  int max_ranks = 64;
  size_t keep_finished = 16;
};

// `hccl-tune` beside this executable, in ../bin, or in ../tuner (the build tree); "" when none is executable.
std::string DefaultSweepCommand();

// The argument vector (without argv[0]) the daemon runs for `req` as sweep `id`. InvalidArgument naming the
// field for out-of-range numbers or names that are not plain identifiers.
absl::StatusOr<std::vector<std::string>> SweepChildArgs(const v1::StartSweepRequest& req, const std::string& id,
                                                        const std::string& daemon_target, int max_ranks);

class SweepRunner {
 public:
  explicit SweepRunner(SweepRunnerOptions options);
  ~SweepRunner();  // Shutdown()
  SweepRunner(const SweepRunner&) = delete;
  SweepRunner& operator=(const SweepRunner&) = delete;

  // Starts a sweep; returns its id (the resumed id for req.resume).
  absl::StatusOr<std::string> Start(const v1::StartSweepRequest& req);
  // The same with arguments the request cannot express appended (the daemon's own mini-sweeps: --range,
  // --no-table). For callers inside the daemon only: `extra_args` are not checked.
  absl::StatusOr<std::string> Start(const v1::StartSweepRequest& req, const std::vector<std::string>& extra_args);
  // Stops sweep `id` ("" = the running one); returns its id. NotFound / FailedPrecondition when not running.
  absl::StatusOr<std::string> Cancel(const std::string& id);
  // The sweep a watcher of `id` follows: `id` itself when known, for "" the running sweep else the newest.
  absl::StatusOr<std::string> Resolve(const std::string& id);
  // Waits up to `timeout` for a state of `id` newer than `*seq`: true with `out` filled and `*seq` advanced, false
  // when none came in time. NotFound naming `id` when this daemon no longer keeps that sweep (evicted, see
  // keep_finished) or never ran it: no later call will find it either.
  absl::StatusOr<bool> Wait(const std::string& id, uint64_t* seq, absl::Duration timeout, v1::SweepProgress* out);
  std::string running_id();
  void Shutdown();
  // Sets how the sweep reaches this daemon when it was not known at construction (a TCP port bound later).
  void set_daemon_target(const std::string& target);

 private:
  struct Run {
    v1::SweepProgress progress;
    uint64_t seq = 0;  // bumped by every change
    pid_t pid = -1;    // also the process group id
    bool cancel_requested = false;
    absl::Time cancel_time;
    std::deque<std::string> stderr_tail;
    std::string failure;  // the sweep's own account of its failure (its "failed" event)
  };
  void Supervise(std::shared_ptr<Run> run, int out_fd, int err_fd);
  void OnStdoutLine(Run& run, const std::string& line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(Run& run, int wait_status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Unknown(const std::string& id) const;  // NotFound naming `id`

  const SweepRunnerOptions options_;
  absl::Mutex mu_;
  std::string daemon_target_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> order_ ABSL_GUARDED_BY(mu_);  // ids, oldest first
  std::string running_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> supervisors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hccltune::daemon

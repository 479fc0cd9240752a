// The job view of hccl-tuned (docs/TROUBLESHOOTING.md, "Running jobs"): the node's running jobs and ranks, kept in
// memory from the ranks' heartbeats (runtime/tuning_client/heartbeat.h), and dumps of their flight recorders on
// request (`hccl-tune doctor --job`).
//
// A rank's state, from its heartbeat (its age added to the times it carries):
//   silent   no heartbeat for `silent_after` (3 s): stopped, stuck outside the runtime, or gone;
//   waiting  inside a collective, blocked for `stall_after` (2 s) or more: waiting for its peers;
//   in-call  inside a collective, not (yet) for that long;
//   stalled  between calls while a rank of the same communicator (on this node) waits in a later operation: the
//            rank the others wait for;
//   idle     between calls.
// A rank is forgotten `expire_after` (10 s, ten missed heartbeats) after its last heartbeat, a job with its last
// rank. Bounds: `max_jobs` jobs (64), `max_ranks` ranks per job (1024), `max_comms` communicators per rank (32,
// more are left out), `max_dump_bytes` (256 MiB) of dumps held per request; a heartbeat over a bound gets
// RESOURCE_EXHAUSTED naming it.
//
// Dump requests: Dump() marks a request on the job; each live rank gets it in its next heartbeat's reply
// (at most a second later: the ranks' client threads answer even while their calls are blocked), dumps, and sends
// the dumps in heartbeats answering the request. Dump() returns when every rank asked has answered or the timeout
// has passed (a rank that did not answer gets an entry saying so). One request per job at a time.
//
// Ownership: a job belongs to the uid of its first heartbeat (when known: the unix socket's SO_PEERCRED); another
// uid's heartbeat for it is refused, and only its owner or a privileged caller (a tuner, a TLS client) may have it
// dump.
//
// Thread-safety: every method is safe from any thread (one mutex; Dump waits on a condition variable).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hccltune/v1/tuner.pb.h"

namespace hccltune::daemon {

struct JobLimits {
  size_t max_jobs = 64;
  size_t max_ranks = 1024;
  int max_comms = 32;
  size_t max_dump_bytes = size_t{256} << 20;
  absl::Duration silent_after = absl::Seconds(3);
  absl::Duration expire_after = absl::Seconds(10);
  absl::Duration stall_after = absl::Seconds(2);
};

class JobTable {
 public:
  explicit JobTable(JobLimits limits = {}, std::string host = "");

  // Records a heartbeat, or the dumps it carries when it answers a request; `uid`: the caller's, when known.
  // The reply asks for dumps when a request of the rank's job is pending and the rank has not answered it.
  // INVALID_ARGUMENT names a bad field; PERMISSION_DENIED another uid's job; RESOURCE_EXHAUSTED a bound.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& req, std::optional<uint32_t> uid,
                                                  absl::Time now);
  // Every job (job_id empty) or one job (NOT_FOUND naming it and the jobs there are).
  absl::StatusOr<v1::GetJobsResponse> List(const std::string& job_id, absl::Time now);
  // Has every live rank of the job dump its flight recorders; waits up to `timeout` for them. Returns one JobDump
  // per dump, then one per rank asked that sent none (its error says why). `privileged`: a tuner or TLS caller.
  absl::StatusOr<std::vector<v1::JobDump>> Dump(const std::string& job_id, std::optional<uint32_t> uid, bool privileged,
                                                absl::Duration timeout);
  // Ends waiting Dump calls (the daemon stops).
  void Shutdown();

  const JobLimits& limits() const { return limits_; }

 private:
  struct Rank {
    v1::HeartbeatRequest beat;  // the last heartbeat with progress (no dumps)
    absl::Time seen;
  };
  struct Answer {
    std::vector<v1::FlightDump> dumps;
    uint32_t total = 0;
    std::string error;
    bool done = false;
  };
  struct Request {
    uint64_t id = 0;
    std::set<int> asked;
    std::map<int, Answer> answers;
    size_t bytes = 0;
  };
  struct Job {
    std::string id;
    int world = 1;
    std::optional<uint32_t> uid;
    std::map<int, Rank> ranks;
    std::vector<v1::JobNode> nodes;  // the newest node list a rank sent (multi-node jobs)
    std::optional<Request> request;
  };

  void ExpireLocked(absl::Time now);
  // The job `id` names (exactly, or the part after "KIND:"); NOT_FOUND or INVALID_ARGUMENT (ambiguous) naming it.
  absl::StatusOr<Job*> FindLocked(const std::string& id);
  absl::Status RecordDumpsLocked(Job& job, const v1::HeartbeatRequest& req);
  std::string StateOf(const Job& job, const Rank& rank, absl::Time now) const;
  void FillJob(const Job& job, absl::Time now, v1::Job* out) const;
  static bool RequestDone(const Request& r);

  const JobLimits limits_;
  const std::string host_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Job> jobs_;
  uint64_t next_request_ = 1;
  bool shutdown_ = false;
};

}  // namespace hccltune::daemon

// The job view's heartbeats (docs/TROUBLESHOOTING.md, "Running jobs"): once a second per process and daemon, one
// Heartbeat RPC with the process's job id, rank, pid, host and every registered communicator's progress (read
// from its flight recorder). A reply that asks for dumps (dump_request) is answered at once, from the same
// thread: every communicator's flight recorder is dumped (its local file as DumpFlightRecorders writes it, and
// its text), and each dump goes to the daemon in a heartbeat of its own (a dump may be up to ~1 MB).
//
// Why an RPC of its own rather than a field of ReportTimings: timings flow only while calls are sampled, and a
// rank blocked inside a collective (or one that stopped calling) samples nothing — exactly when the job view
// and its dump request must still get through; a unary RPC also carries the reply that asks for the dump.
//
// Cost: nothing on the call path. The sender threads of the process's tuning clients (TuningClient's
// background thread, which wakes every 200 ms) call Tick; one of them sends when the process's last heartbeat to
// that daemon is 1 s old. Reading a communicator's progress copies its ring (2048 records by default) once a
// second.
//
// Thread-safety: every method is safe from any thread. A source's `progress` and `dump` are called only between
// its Register and Unregister (Unregister waits for a call in progress).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "hccltune/v1/tuner.pb.h"
#include "runtime/selector/tuning.h"

namespace hccltune::tuning {

inline constexpr absl::Duration kHeartbeatInterval = absl::Seconds(1);
inline constexpr absl::Duration kNodesInterval = absl::Seconds(30);

struct HeartbeatSource {
  std::string target;  // the daemon's gRPC target
  std::string job_id;
  int job_rank = 0, job_world = 1;
  std::function<CommProgress()> progress;
  std::function<FlightDumpText()> dump;
  std::vector<JobNodeInfo> nodes;  // the job's nodes (may be empty): sent every kNodesInterval
};

using HeartbeatSend = std::function<absl::StatusOr<v1::HeartbeatResponse>(const v1::HeartbeatRequest&)>;

class Heartbeats {
 public:
  // The process's registry (never destroyed).
  static Heartbeats& Get();

  uint64_t Register(HeartbeatSource source);
  void Unregister(uint64_t id);
  // Sends this process's heartbeat to `target` through `send` when the last one is kHeartbeatInterval old (and
  // answers a dump request in its reply). A daemon without the RPC (Unimplemented) is not asked again.
  void Tick(const std::string& target, const HeartbeatSend& send);

  // The heartbeat of the sources of `target` as the first one to it is sent, nodes included (tests).
  v1::HeartbeatRequest Build(const std::string& target);

 private:
  struct Entry {
    HeartbeatSource source;
    int64_t seen_completed = -2;  // last_completed at the last heartbeat
    absl::Time progressed;        // when last_completed was last seen to change
  };
  struct Target {
    absl::Time last_sent = absl::InfinitePast();
    bool sending = false;
    bool unsupported = false;
    uint64_t answered = 0;  // the last dump request answered (or being answered)
    absl::Time nodes_sent = absl::InfinitePast();
  };
  // `with_nodes`: add the job's nodes (the first source that has them).
  v1::HeartbeatRequest BuildLocked(const std::string& target, absl::Time now, bool with_nodes);
  // Dumps every source of `target` and sends the dumps (one heartbeat each) answering `request`.
  void AnswerDumpRequest(const std::string& target, uint64_t request, const v1::HeartbeatRequest& identity,
                         const HeartbeatSend& send);

  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Entry> sources_;  // by id: oldest first
  std::map<std::string, Target> targets_;
};

}  // namespace hccltune::tuning

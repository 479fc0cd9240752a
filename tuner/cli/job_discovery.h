// Which hccl-tuned daemons `hccl-tune doctor --job` asks for a job's dumps: the node's own daemon, and for a job
// spanning nodes every other node's daemon, found from the job itself. The job's ranks send their world's node list
// with their heartbeats (each node's name, its addresses on the networks between the nodes, its ranks); the local
// daemon returns it with the job (GetJobs), and each node with none of the local daemon's ranks is asked at
// ADDRESS:PORT, its addresses in order until a daemon there knows the job. PORT is the caller's, else the local
// daemon's TCP listener port (nodes of a cluster run the same configuration). Over TCP the calls use TLS when
// HCCL_TUNE_DAEMON_TLS_* are set (rpc/channel.h), so another node's daemon sees a TLS client.
//
// Thread-safety: a stateless function.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hccltune::cli {

struct JobDaemons {
  std::vector<std::string> targets;  // the local daemon first, then one per other node reached
  std::vector<std::string> notes;    // one per node not reached, saying why and what to give instead
};

// The daemons of job `job_id` starting from `local` (which must know the job: NOT_FOUND naming it otherwise);
// `port` 0: the local daemon's listener port.
absl::StatusOr<JobDaemons> FindJobDaemons(const std::string& local, const std::string& job_id, int port);

}  // namespace hccltune::cli

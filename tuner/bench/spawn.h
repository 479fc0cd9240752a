// Spawns N local ranks of this executable (fork + exec of /proc/self/exe) with the rank environment set
// (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, and HCCL_TUNE_STORE pointing at a store server this
// process runs), waits for them, and reports the first failure. If one rank fails, the others get SIGTERM
// after a grace period, then SIGKILL: nothing is left running.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace hccltune::bench {

struct SpawnOptions {
  int ranks = 2;
  std::vector<std::string> args;  // argv for each child (without argv[0])
  absl::Duration timeout = absl::Minutes(30);
};

// Returns OK when every rank exited 0; otherwise an error naming the first rank that failed and how.
absl::Status SpawnLocalRanks(const SpawnOptions& opt);

}  // namespace hccltune::bench

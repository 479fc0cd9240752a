// The runtime's tuning client: the only runtime part that links gRPC. It implements the core's TuningClient
// over the node's hccl-tuned (docs/CONVENTIONS.md, Daemon discovery):
//   - FetchTable: GetTable for this topology and world size (the pinned HCCL_TUNE_TABLE_VERSION if set);
//   - LatestTable: rank 0 polls GetTable(if_newer_than) in the background in online mode;
//   - Report(): sampled timings (fixed-size, configuration as an interned id) go into a lock-free
//     single-producer ring (full = dropped and counted, never blocking the caller); a background thread
//     formats them and sends them in batches with ReportTimings to this rank's own daemon.
// A daemon of an older topology fingerprint format (StatusResponse.topology_format absent, asked when it has no
// table under this build's fingerprint, or before the first report) is spoken to with the format-1 fingerprint
// and JSON of the topology, which it keys its tables by, for fetching, polling and reporting alike; a topology
// format 1 cannot express (RDMA ports, a peer runtime) gets a warning naming both versions and built-in defaults.
// No daemon, or a daemon that dies: one warning, the last table stays in effect, reconnection with backoff;
// an absent unix socket fails at once, so communicator init does not stall. After fork() the child's copy
// reports nothing and starts no threads (pthread_atfork), so DataLoader-style workers are safe.
//
// Thread-safety: all methods are safe to call concurrently with the background threads. This header is
// deliberately small (C++17, no gRPC or runtime internals) so any entry point can include it.
#pragma once

#include <cstdint>

namespace hccltune {

// Installs the daemon-backed factory for every communicator created afterwards in this process (entry points
// call it once: hccl-tune bench/sweep, the torch backend). Idempotent.
void InstallDaemonTuning();

// Counters of this process's clients (for tests and `hccl-tune status`-style reporting).
struct TuningClientCounters {
  uint64_t samples_sent = 0;
  uint64_t samples_dropped = 0;
  uint64_t batches_failed = 0;
  uint64_t tables_fetched = 0;
};
TuningClientCounters GetTuningClientCounters();

}  // namespace hccltune

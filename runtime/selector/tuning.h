// The seam between the core runtime (no gRPC) and a tuning service. The core asks a TuningClient for the
// table at communicator init and, in online mode, for newer versions; it hands sampled call timings to the
// client's sink. runtime/tuning_client implements it over the daemon's gRPC service; entry points (bench,
// sweep, the torch backend, the C ABI's full library) install its factory with InstallTuningClientFactory, so
// user code changes nothing, while a program that links only the core runs on the built-in defaults.
//
// Table distribution and switching (in the communicator): at init, rank 0 fetches the table and broadcasts
// it to every rank over the communicator itself. In online mode every HCCL_TUNE_SYNC_INTERVAL-th operation is
// a checkpoint: before it, rank 0 broadcasts the newest version it knows (and the table when it changed), and
// every rank installs it there — so all ranks switch at the same operation, whatever sequence number each was
// at when rank 0 learned of it.
//
// Thread-safety: factories are installed before communicators are created; a TuningClient's methods may be
// called from the communicator's calling thread while its own background threads run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/config.h"
#include "runtime/selector/selector.h"

namespace hccltune {

// A sampled call as the tuning client queues it: fixed size, no allocation. The configuration is an id from
// InternConfiguration (formatted once per distinct configuration, not per call).
struct RawTimingSample {
  uint64_t bytes = 0;
  uint64_t sequence = 0;
  double duration_us = 0;
  uint32_t config_id = 0;
  int32_t world_size = 0;
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
};

// Process-wide configuration ids: a canonical string always gets the same id (ids start at 1; at most 65536
// distinct strings, beyond which 0 = "unknown" is returned). Thread-safe; takes a mutex: call it when the
// configuration changes, not per call.
uint32_t InternConfiguration(const std::string& canonical);
// The canonical string of an id; empty for 0 or an unknown id. Thread-safe.
std::string InternedConfiguration(uint32_t id);

// A communicator's progress for the job view's heartbeats (docs/TROUBLESHOOTING.md, "Running jobs"), read from its
// flight recorder off the call path. Operation numbers are the communicator's; -1 = none yet.
struct CommProgress {
  std::string name;
  uint64_t tag = 0;
  int rank = 0, size = 1;
  bool recorder_off = false;  // HCCL_TUNE_FR_ENTRIES=0: nothing below is known
  int64_t last_started = -1;
  Collective started_collective = Collective::kAllreduce;
  uint64_t started_bytes = 0;
  int64_t last_completed = -1;
  Collective completed_collective = Collective::kAllreduce;
  uint64_t completed_bytes = 0;
  bool in_call = false;          // the newest call has not ended
  int64_t blocked_since_ns = 0;  // CoarseNowNs when the call in progress was first seen blocked (0: not)
};

// A node of the job for the job view (`doctor --job` finds the other nodes' daemons from these): its identity, its
// IPv4 addresses on the networks between the job's nodes, and the ranks on it.
struct JobNodeInfo {
  std::string name;
  std::vector<std::string> addresses;
  std::vector<int> ranks;
};

// One flight-recorder dump taken on the daemon's request: its file name and text, or why there is none.
struct FlightDumpText {
  std::string file_name, json, error;
};

struct TuningContext {
  Environment env;
  std::string fingerprint;
  std::string topology_json;
  int world_size = 1;
  int rank = 0;
  bool authority = false;  // rank 0: fetches and watches the table
  // The job view. job_id: docs/CONVENTIONS.md, Job id; job_rank/job_world: the launcher's, else this
  // communicator's. `progress` and `dump` read and dump this communicator's flight recorder from any thread; they
  // stay valid until the client is destroyed (the communicator destroys its client first). Null: not offered.
  std::string job_id;
  int job_rank = 0, job_world = 1;
  std::function<CommProgress()> progress;
  std::function<FlightDumpText()> dump;
  std::vector<JobNodeInfo> nodes;  // the job's nodes when this communicator is its world and spans nodes
};

class TuningClient {
 public:
  virtual ~TuningClient() = default;
  // Authority only. The table for this topology and world size (the pinned HCCL_TUNE_TABLE_VERSION if set).
  // Returns within `timeout`; NotFound when the daemon has none, Unavailable when there is no daemon.
  virtual absl::StatusOr<std::shared_ptr<const TunedTable>> FetchTable(absl::Duration timeout) = 0;
  // Authority only, online mode: the newest table known from background polling (null when none).
  virtual std::shared_ptr<const TunedTable> LatestTable() = 0;
  // Receives a sampled timing of this rank. Cheap and non-blocking (drops and counts rather than waits).
  // REQUIRES: one producer at a time — the communicator's calling thread, under its call lock.
  virtual void Report(const RawTimingSample& sample) = 0;
};

using TuningClientFactory = std::function<std::unique_ptr<TuningClient>(const TuningContext&)>;
// Process-wide; nullptr uninstalls.
void InstallTuningClientFactory(TuningClientFactory factory);
bool TuningClientFactoryInstalled();
// A client from the installed factory (null when none is installed or it declines, e.g. HCCL_TUNE_DAEMON=off).
std::unique_ptr<TuningClient> MakeTuningClient(const TuningContext& ctx);

}  // namespace hccltune

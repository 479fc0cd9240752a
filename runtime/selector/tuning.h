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

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/api/communicator.h"
#include "runtime/common/config.h"
#include "runtime/selector/selector.h"

namespace hccltune {

struct TuningContext {
  Environment env;
  std::string fingerprint;
  std::string topology_json;
  int world_size = 1;
  int rank = 0;
  bool authority = false;  // rank 0: fetches and watches the table
};

class TuningClient {
 public:
  virtual ~TuningClient() = default;
  // Authority only. The table for this topology and world size (the pinned HCCL_TUNE_TABLE_VERSION if set).
  // Returns within `timeout`; NotFound when the daemon has none, Unavailable when there is no daemon.
  virtual absl::StatusOr<std::shared_ptr<const TunedTable>> FetchTable(absl::Duration timeout) = 0;
  // Authority only, online mode: the newest table known from background polling (null when none).
  virtual std::shared_ptr<const TunedTable> LatestTable() = 0;
  // Receives the sampled timings of this rank (cheap, non-blocking: drops rather than waits).
  virtual std::shared_ptr<TimingSink> sink() = 0;
};

using TuningClientFactory = std::function<std::unique_ptr<TuningClient>(const TuningContext&)>;
// Process-wide; nullptr uninstalls.
void InstallTuningClientFactory(TuningClientFactory factory);
bool TuningClientFactoryInstalled();
// A client from the installed factory (null when none is installed or it declines, e.g. HCCL_TUNE_DAEMON=off).
std::unique_ptr<TuningClient> MakeTuningClient(const TuningContext& ctx);

}  // namespace hccltune

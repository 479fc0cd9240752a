// TunerServer: hccl-tuned's parts wired together — the store, live ingest, handlers and the gRPC server on a
// unix socket (mode 0660, accepted by UnixListener so each caller's role is known: daemon/peer_auth.h) and
// optionally TCP. Used by hccl-tuned's main and by tests that want a real server.
//
// Socket ownership: a lock file `<socket>.lock` (flock) is held while the server lives, so a second daemon on the
// same path is refused with a clear error; a socket file nobody holds is stale and replaced.
//
// Thread-safety: Start and Stop from one thread; the handlers serve concurrently.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/daemon_config.h"
#include "daemon/grpc_service.h"
#include "daemon/handlers.h"
#include "daemon/live_ingest.h"
#include "daemon/metrics.h"
#include "daemon/metrics_http.h"
#include "daemon/mini_sweep.h"
#include "daemon/online_policy.h"
#include "daemon/peer_exports.h"
#include "daemon/sweep_runner.h"
#include "daemon/unix_listener.h"
#include "db/tuning_store.h"

namespace hccltune::daemon {

class TunerServer {
 public:
  // Opens the database (creating its directory), takes the socket, starts serving.
  static absl::StatusOr<std::unique_ptr<TunerServer>> Start(const DaemonConfig& config);
  ~TunerServer();

  // Stops a running sweep (SIGINT, then SIGKILL after the grace; reaped) while still serving, then stops accepting,
  // ends watch streams, waits up to `drain` for calls in progress, persists queued samples,
  // closes the database and removes the socket. Idempotent.
  void Stop(absl::Duration drain = absl::Seconds(5));

  TunerHandlers& handlers() { return *handlers_; }
  SweepRunner& sweeps() { return *sweeps_; }
  OnlinePolicy& online_policy() { return *policy_; }
  MiniSweeper& mini_sweeps() { return *mini_; }
  JobTable& jobs() { return jobs_; }
  const DaemonConfig& config() const { return config_; }
  // The TCP port actually bound (when listen ends in ":0"), else 0.
  int tcp_port() const { return tcp_port_; }

 private:
  TunerServer() = default;
  absl::Status TakeSocket();
  Metrics::Sources MetricsSources();

  DaemonConfig config_;
  int lock_fd_ = -1;
  int tcp_port_ = 0;
  bool stopped_ = false;
  bool socket_created_ = false;  // only then is the socket file ours to remove
  std::unique_ptr<db::TuningStore> store_;
  std::unique_ptr<LiveIngest> ingest_;
  std::unique_ptr<PeerExports> exports_;
  std::unique_ptr<TunerHandlers> handlers_;
  std::unique_ptr<SweepRunner> sweeps_;
  std::unique_ptr<OnlinePolicy> policy_;
  std::unique_ptr<MiniSweeper> mini_;
  std::unique_ptr<Metrics> metrics_;           // only with metrics_port
  std::unique_ptr<MetricsHttp> metrics_http_;  // serves metrics_
  PeerRegistry peers_;                         // the unix socket's callers (SO_PEERCRED)
  std::unique_ptr<Authorizer> auth_;
  std::unique_ptr<UnixListener> unix_;
  JobTable jobs_;  // the job view (heartbeats, GetJobs, DumpJob)
  std::unique_ptr<TunerService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace hccltune::daemon

// The rendezvous a launcher implies when no address is configured (docs/LAUNCHING.md): the TCP store every rank
// connects to, and which rank serves it.
//
// - Slurm (srun): the first node of the step (SLURM_STEP_NODELIST) on the first reserved port
//   (SLURM_STEP_RESV_PORTS) or on a port derived from SLURM_JOB_ID.SLURM_STEP_ID inside HCCL_TUNE_PORT_RANGE;
//   served by local rank 0 of that node (SLURMD_NODENAME names it).
// - Open MPI (mpirun): mpirun's host (OMPI_MCA_orte_hnp_uri) on a port derived from the job id inside
//   HCCL_TUNE_PORT_RANGE; served by local rank 0 of the node that owns that address (mpirun runs ranks on its own
//   host first; a job whose mpirun host runs no rank needs MASTER_ADDR/MASTER_PORT).
// - MPICH (mpiexec, hydra): rank 0 serves on a free port and publishes "host:port" through hydra's PMI-1 name
//   service on PMI_FD (publish_name, lookup_name), then every rank finalizes PMI.
// - A PMIx server (srun --mpi=pmix, Open MPI's mpirun, prterun; env.launcher_pmix): rank 0 serves on a free port
//   and puts its addresses through PMIx, in place of the Slurm and Open MPI rules above
//   (runtime/bootstrap/pmix_rendezvous.h). A build without PMIx uses those rules.
//
// Thread-safety: call once per process, before anything else reads PMI_FD.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/store.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/common/config.h"

namespace hccltune {

// A store client that owns (or shares) the server it talks to (when this rank serves), so the server lives at least
// as long as the communicators that use it.
class ServedStore final : public Store {
 public:
  ServedStore(std::shared_ptr<TcpStoreServer> server, std::shared_ptr<Store> client)
      : server_(std::move(server)), client_(std::move(client)) {}
  absl::Status Set(const std::string& k, const std::string& v) override { return client_->Set(k, v); }
  absl::StatusOr<std::string> Get(const std::string& k, absl::Duration t) override { return client_->Get(k, t); }
  absl::StatusOr<int64_t> Add(const std::string& k, int64_t d) override { return client_->Add(k, d); }
  absl::StatusOr<bool> Check(const std::vector<std::string>& k) override { return client_->Check(k); }
  std::string Describe() const override { return client_->Describe(); }
  bool serving() const { return server_ != nullptr; }

 private:
  std::shared_ptr<TcpStoreServer> server_;
  std::shared_ptr<Store> client_;
};

// How long a rank whose init failed keeps serving the rendezvous, so that the ranks still waiting read why (the
// announcement under "abort") instead of a lost connection: they look every 200 ms at most.
inline constexpr absl::Duration kServerLinger = absl::Seconds(1);

// Whether the launcher of `env` implies a rendezvous (a host and port, a PMI connection or a PMIx server).
bool HasLauncherRendezvous(const Environment& env);

// A launcher's rendezvous: the store, and the environment it was made with, with rank, world size, local rank and
// local size as the launcher's runtime gave them (PMIx; otherwise the launcher's variables, unchanged).
struct LaunchedRendezvous {
  std::shared_ptr<ServedStore> store;
  Environment env;
};

// Connects to the launcher's rendezvous, serving it from this rank when the rules above pick it. Every error
// names the launcher variables the address came from; waits at most HCCL_CONNECT_TIMEOUT.
absl::StatusOr<LaunchedRendezvous> ConnectLauncherRendezvous(const Environment& env);

}  // namespace hccltune

// The rendezvous through the launcher's PMIx server (srun --mpi=pmix, Open MPI's mpirun, prterun), used in place of
// a derived host and port when the launcher exports PMIX_NAMESPACE and PMIX_RANK (docs/LAUNCHING.md):
//
//   1. PMIx_Init connects to the server; it gives this process's rank, the job's size, and the local rank and
//      size (PMIX_RANK, PMIX_JOB_SIZE, PMIX_LOCAL_RANK, PMIX_LOCAL_SIZE), which must agree with the launcher's own
//      variables where those are set.
//   2. Rank 0 starts the TCP store on a free port on all interfaces, puts "ADDRESSES:PORT" (its IPv4 addresses,
//      loopback only when it has no other) under kPmixAddressKey and commits it.
//   3. Every other rank gets that key from rank 0 (PMIx's direct modex: the server answers once rank 0 has
//      committed, no fence of every rank, so a rank that never arrives does not hide which one it is; a get that
//      comes back NOT-FOUND while rank 0 is still starting is repeated), waiting at most HCCL_CONNECT_TIMEOUT
//      (PMIX_TIMEOUT), and connects to the first address on one of its own subnets.
//   4. PMIx_Finalize as soon as the address is known (PmixSession is RAII); the store's rank exchange then names
//      any rank that never joined.
//
// A second rendezvous in the process reuses the first one's facts and address (the PMIx server is finalized by
// then) and rank 0's store server, which lives as long as the process: each communicator's keys are under its own
// tag (runtime/api/rank_exchange), so communicators from the environment may follow or overlap one another.
//
// Thread-safety: PmixRendezvous serialises callers; PmixSession is for one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/launcher_rendezvous.h"
#include "runtime/common/config.h"
#include "runtime/net/interfaces.h"

namespace hccltune {

// The key rank 0 puts its store's address under.
inline constexpr char kPmixAddressKey[] = "hccltune.rendezvous";

// Whether this build has the PMIx client (libpmix-dev found at build time, cmake/Dependencies.cmake).
bool PmixBuilt();

// What the PMIx server says about this process.
struct PmixFacts {
  std::string nspace;
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
};

// One PMIx client session: PMIx_Init when opened, PMIx_Finalize when destroyed. Every error names the PMIx call,
// the namespace and PMIx's status string. Without PMIx in the build, Open is Unimplemented.
class PmixSession {
 public:
  static absl::StatusOr<std::unique_ptr<PmixSession>> Open();
  ~PmixSession();
  PmixSession(const PmixSession&) = delete;
  PmixSession& operator=(const PmixSession&) = delete;

  const PmixFacts& facts() const { return facts_; }
  // PMIx_Put (global scope) and PMIx_Commit of `value` under `key`.
  absl::Status Publish(const std::string& key, const std::string& value);
  // PMIx_Get of `key` from `rank` of this namespace, waiting at most `timeout` for it to be committed.
  absl::StatusOr<std::string> Lookup(int rank, const std::string& key, absl::Duration timeout);

 private:
  PmixSession() = default;
  PmixFacts facts_;
};

// The value rank 0 publishes: its non-loopback IPv4 addresses in interface order, "127.0.0.1" when it has none,
// then ":PORT" ("10.0.0.1,192.0.2.2:41234").
std::string PmixAddressValue(const std::vector<InterfaceAddress>& interfaces, int port);

// Where to connect for a published `value`: the first of its addresses on one of `interfaces`' subnets (that
// address is reachable directly), else its first. The error names the value.
struct PmixAddress {
  std::string host;
  int port = 0;
};
absl::StatusOr<PmixAddress> ChoosePmixAddress(const std::string& value,
                                              const std::vector<InterfaceAddress>& interfaces);

// Checks the PMIx facts against the launcher's own variables in `env` (rank, world size, local rank and size, where
// set) and returns `env` with them filled in. The error names both sources.
absl::StatusOr<Environment> ApplyPmixFacts(const Environment& env, const PmixFacts& facts);

// The rendezvous above. Waits at most HCCL_CONNECT_TIMEOUT; the error says which rank is missing (rank 0) or which
// PMIx call failed.
absl::StatusOr<LaunchedRendezvous> PmixRendezvous(const Environment& env);

}  // namespace hccltune

// `hccl-tune sweep --runtime openmpi|mpich`: the sweep of tuner/sweep/ run on another MPI library's own
// algorithms. The same measurement protocol, search (pruning, confidence intervals), winners, journal (samples and
// progress per batch, resumable) and store, with a Measurer that drives one long-running MPI job of the bench
// (tuner/peers/mpi_job.h) instead of this runtime's communicator.
//
// Candidates per collective: every algorithm the library names (MPI_T), the library's own choice as the default
// (openmpi:default, mpich:auto: never pruned, its margin reported), and for Open MPI's segmenting algorithms each
// size of `segments`. Winners are stored under a topology whose fingerprint names the runtime
// ("runtime":"openmpi-4.1"): one node, `ranks` ranks; tables of different runtimes never mix, and this runtime's
// selector, online policy and mini-sweeps never read such a table.
//
// Thread-safety: one call at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "tuner/sweep/sweep.h"

namespace hccltune::peers {

struct PeerSweepSpec {
  std::string runtime;  // "openmpi" or "mpich"
  int ranks = 4;
  sweep::SweepSpec spec;  // collectives, dtypes (fp32 only), sizes, search; algorithms: the library's names
  std::vector<uint64_t> segments = {0, 32u << 10, 256u << 10};  // Open MPI's segmenting algorithms
};

struct PeerSweepIo {
  db::TuningStore* journal = nullptr;
  db::TuningStore* tables = nullptr;
  std::string sweep_id;
  bool resume = false;
  bool store_table = true;
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const sweep::Progress&)> on_progress;
};

struct PeerSweepOutcome {
  sweep::SweepOutcome outcome;
  db::Topology topology;  // the runtime's fingerprint and JSON
};

// Open MPI 4.x coll/tuned algorithms that take a segment size (others ignore it).
bool OpenMpiSegments(Collective c, const std::string& algorithm);

// Runs the sweep. InvalidArgument for a collective the bench does not run, a dtype other than fp32, or an
// algorithm the library does not have (listing what it has); the job's errors as mpi_job.h says.
absl::StatusOr<PeerSweepOutcome> RunPeerSweep(const PeerSweepSpec& spec, const PeerSweepIo& io);

}  // namespace hccltune::peers

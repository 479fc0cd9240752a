// A running MPI job of hccl-tune-mpi-bench (tuner/peers/mpi_bench.c) under one MPI library's own launcher, driven
// line by line: which algorithms the library has, and batches of timed iterations of one of them. What
// `hccl-tune sweep --runtime openmpi|mpich` measures with.
//
// The job: `mpirun.openmpi --oversubscribe [--allow-run-as-root] -np N --mca coll_tuned_use_dynamic_rules 1 BENCH`
// or `mpiexec.mpich -np N BENCH`, its stdin and stdout piped to this process (stderr passes through), in a process
// group of its own. Every answer is awaited at most `answer_timeout`; a job that exits or stops answering is an
// error naming the launcher and what was asked, and the job is ended (SIGTERM to its group, SIGKILL after 5 s).
// The destructor asks the job to quit and ends it the same way if it does not.
//
// Thread-safety: one thread per job.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/peer_configuration.h"
#include "runtime/common/types.h"
#include "tuner/sweep/search.h"

namespace hccltune::peers {

// Where hccl-tune finds a runtime's launcher and its build of the bench.
struct MpiRuntime {
  std::string name;      // "openmpi" or "mpich"
  std::string launcher;  // mpirun.openmpi / mpiexec.mpich (a path or a name looked up on PATH)
  std::string bench;     // the bench built with the runtime's compiler wrapper
};
// The runtime `name` ("openmpi" or "mpich"): its launcher, and its bench beside this executable (the build tree) or
// in ../libexec/hccl-tune (an installation); a launcher name is looked up in `search_path` (PATH, as
// Environment reads it; empty: /usr/bin:/bin). FailedPrecondition naming what is missing and how to get it.
absl::StatusOr<MpiRuntime> FindMpiRuntime(const std::string& name, const std::string& search_path);

class MpiJob {
 public:
  // Starts `ranks` ranks; `env` entries (NAME=VALUE) are added to the launcher's environment (and so the ranks').
  static absl::StatusOr<std::unique_ptr<MpiJob>> Start(const MpiRuntime& rt, int ranks,
                                                       const std::vector<std::string>& env = {},
                                                       absl::Duration answer_timeout = absl::Minutes(5));
  ~MpiJob();
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  const std::string& runtime() const { return runtime_; }
  // The library's major.minor ("4.1"), as it reports itself.
  const std::string& version() const { return version_; }
  int ranks() const { return ranks_; }

  // The library's algorithms for collective `c` (allreduce, allgather, broadcast, reducescatter), its own
  // choice excluded; InvalidArgument for another collective.
  absl::StatusOr<std::vector<std::string>> Algorithms(Collective c);
  // `iters` timed iterations after `warmup` untimed ones, each after a barrier: per iteration the maximum over
  // ranks and the mean over ranks. An error names the configuration and the size (a wrong result included).
  absl::StatusOr<sweep::Batch> Measure(Collective c, uint64_t bytes, const PeerConfiguration& config, int iters,
                                       int warmup);

 private:
  MpiJob() = default;
  absl::Status Send(const std::string& line);
  // The next line starting with "@ ", without it.
  absl::StatusOr<std::string> Answer(const std::string& asked);
  void End();

  std::string runtime_, version_, launcher_;
  int ranks_ = 0;
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  std::string buffered_;
  absl::Duration timeout_;
};

// Collectives the bench runs.
bool PeerCollective(Collective c);

}  // namespace hccltune::peers

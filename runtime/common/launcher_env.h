// What a launcher (torchrun, Open MPI's mpirun, MPICH's mpiexec, Slurm's srun, a PMIx server) tells a rank through its
// environment: rank, world size, local rank and size, and the rendezvous it implies when no MASTER_ADDR is set
// (docs/LAUNCHING.md). The parsers are pure functions over strings; ReadLauncherEnvironment reads the variables
// through an Environment::Source (the process environment only via runtime/common/config).
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/config.h"

namespace hccltune {

// Slurm's tasks per node, SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: "2(x3),1" = 2, 2, 2, 1 (a count,
// optionally followed by "(xN)" repeating it N times). The error names `var` and the part that is wrong.
absl::StatusOr<std::vector<int>> ParseSlurmTasksPerNode(absl::string_view var, absl::string_view text);

// The first host of a Slurm host list such as "node[01-04,07],gpu5" (SLURM_STEP_NODELIST): "node01". Bracket
// ranges keep their zero padding. The error names `var`.
absl::StatusOr<std::string> FirstSlurmHost(absl::string_view var, absl::string_view text);

// The first port of SLURM_STEP_RESV_PORTS ("12000-12003" or "12000,12005"; Slurm's MpiParams=ports=).
absl::StatusOr<int> FirstReservedPort(absl::string_view var, absl::string_view text);

// HCCL_TUNE_PORT_RANGE: "LO-HI" with 1 <= LO <= HI <= 65535.
absl::StatusOr<std::pair<int, int>> ParsePortRange(absl::string_view var, absl::string_view text);

// The host of mpirun's own URI, OMPI_MCA_orte_hnp_uri "1253900288.0;tcp://192.0.2.2:36181;tcp6://[fd00::2]:3839":
// "192.0.2.2" (the first tcp:// address).
absl::StatusOr<std::string> OmpiHnpHost(absl::string_view var, absl::string_view text);

// A port in [lo, hi] derived from a job identity (Slurm "JOBID.STEPID", Open MPI's job id): FNV-1a of `job`,
// modulo the range. Every rank of one job derives the same port; concurrent jobs most likely differ.
int DerivedPort(absl::string_view job, int lo, int hi);

// The launcher's job id (docs/CONVENTIONS.md, Job id), first found: slurm:SLURM_JOB_ID[.SLURM_STEP_ID],
// openmpi:OMPI_MCA_ess_base_jobid, pmix:PMIX_NAMESPACE, torchrun:TORCHELASTIC_RUN_ID (its default "none" as
// torchrun:none@MASTER_ADDR:MASTER_PORT); "" when none is set.
std::string LauncherJobId(const Environment::Source& src);

// Reads the launcher variables into `e` (rank, world_size, local_rank, local_world_size, launcher, the
// launcher_rdzv_* fields and the PMIx ones), in order of precedence: torchrun, Open MPI, MPICH (hydra), Slurm, a
// PMIx server alone. Open MPI's and Slurm's derived rendezvous is filled in even when launcher_pmix says the PMIx
// server carries it instead: a build without PMIx falls back to it.
absl::Status ReadLauncherEnvironment(const Environment::Source& src, Environment& e);

}  // namespace hccltune

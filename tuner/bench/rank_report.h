// The rank's side of the local jobs `hccl-tune bench|sweep|links|verify` start (SpawnLocalRanks, spawn.h): what a
// rank process does so that people and its spawning process can tell it apart and know why it failed.
//
//  - NameRankProcess: the process's name (comm) becomes "hccl-tune/r<rank>" — what `ps -o comm`, `top`,
//    `ss -p` and `pgrep` show. Linux keeps 15 characters: ranks up to 9999 fit; above that the name stays
//    "hccl-tune". Threads started afterwards inherit it.
//  - The report channel: SpawnLocalRanks gives each rank the write end of a pipe of its own and passes its number
//    with `--report-fd N` (before the sub-command). A rank that fails writes one JSON line there:
//      {"code":"DEADLINE_EXCEEDED","message":"rank 0: allreduce ... for rank 2 ...","peer":2}
//    where "peer" (absent when none) is the rank its error blames: the one it waited for, lost, or whose failure
//    another rank announced (BlamedPeer). A rank started by torchrun, srun or mpirun has no channel: nothing is
//    written.
//
// Thread-safety: SetReportFd and NameRankProcess once at start; ReportRankFailure from any thread (the first
// report wins).
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace hccltune::bench {

// The hidden top-level option that carries the report pipe to a spawned rank.
inline constexpr char kReportFdOption[] = "--report-fd";

// Sets the process's comm name for `rank` (nullopt: left as it is).
void NameRankProcess(std::optional<int> rank);

// The report channel of this process (fd >= 0), set from --report-fd; the fd is marked close-on-exec.
void SetReportFd(int fd);

// Writes `s` (not OK) to the report channel when there is one, only the first time; returns `exit_code`, so a
// failure path reads `return ReportRankFailure(s, 1);`.
int ReportRankFailure(const absl::Status& s, int exit_code);

// The rank an error of the runtime blames, from the wording the runtime gives its communication errors: "...
// waited ... for rank N to ...", "rank N (pid P) exited or was killed", "tcp link to rank N (...) lost", "ranks N, M
// never joined", "cannot connect to rank N", "rank N stopped the sweep"; for another rank's announcement quoted inside
// ("rank R aborted CALL: WHY", "rank R could not set up the communicator: WHY") the rank WHY blames, else R. nullopt
// when it names none (a rank's own failure: a bad argument, a wrong result).
std::optional<int> BlamedPeer(absl::string_view message);

}  // namespace hccltune::bench

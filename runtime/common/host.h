// This host's CPUs as the runtime's waiting and transport choices see them.
//
// Thread-safety: pure functions (each reads the system once and caches the answer).
#pragma once

namespace hccltune {

// CPUs online on this host — not this process's affinity: a launcher may bind each rank to one CPU of its own.
int HostCpus();

// Whether a launcher bound this process to a single CPU (mpirun --bind-to core, hccl-tune bench).
bool BoundToOneCpu();

// The CPU this process is bound to when it is bound to exactly one, else -1.
int BoundCpu();

// Whether `host_ranks` ranks on this host outnumber its CPUs (4 ranks on 2 cores): ranks then take turns on the
// CPUs, so waiting yields instead of spinning and work that only pays with both sides running at once (single
// copy of mid-size messages) is avoided.
inline bool Oversubscribed(int host_ranks) { return host_ranks > HostCpus(); }

}  // namespace hccltune

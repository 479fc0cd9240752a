// This host's CPUs as the runtime's waiting and transport choices see them.
//
// Thread-safety: thread-safe; HostCpus and LastLevelCacheBytes read the system once and cache the answer,
// LastLevelCacheBytesIn reads `cpu_dir` on every call, AutoNtStoresBytes is pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hccltune {

// CPUs online on this host — not this process's affinity: a launcher may bind each rank to one CPU of its own.
int HostCpus();

// Whether a launcher bound this process to a single CPU (mpirun --bind-to core, hccl-tune bench).
bool BoundToOneCpu();

// The CPU this process is bound to when it is bound to exactly one, else -1.
int BoundCpu();

// Whether process `pid` of this host (and pid namespace) has exited or was killed: gone, or a zombie its parent
// has not reaped yet. False when it runs or cannot be asked about (another user's process).
bool ProcessGone(int pid);

// Whether `host_ranks` ranks on this host outnumber its CPUs (4 ranks on 2 cores): ranks then take turns on the
// CPUs, so waiting yields instead of spinning and work that only pays with both sides running at once (single
// copy of mid-size messages) is avoided.
inline bool Oversubscribed(int host_ranks) { return host_ranks > HostCpus(); }

// Bytes of the last-level cache (the highest-level data or unified cache, level 3 or above) of the CPU this
// process is bound to, or of CPU 0, as the kernel describes it in sysfs; 0 when it does not (or names no L3). Not
// glibc's sysconf: on a virtual machine it reports the host package's cache (384 MiB on a 2-vCPU guest whose sysfs, and
// whose measured behaviour, say 32).
uint64_t LastLevelCacheBytes();

// The same read from `cpu_dir` (a /sys/devices/system/cpu/cpuN directory): its cache/index*/{level,type,size}.
uint64_t LastLevelCacheBytesIn(const std::string& cpu_dir);

// HCCL_TUNE_NT_STORES=auto for the reducing collectives (allreduce, reducescatter): the call size from which the
// output is written with non-temporal stores. Once every local rank's input and output of a call together fill
// the last-level cache (2 x host_ranks x bytes >= llc_bytes), output lines written through the cache evict the
// inputs and rings the next step reads, so streaming the output past the cache wins; below, the written output
// is still cached when the caller reads it. Clamped to [4 MiB, 32 MiB] (32 MiB: the measured default on a VM
// with a very large shared L3); llc_bytes 0 (unknown) or fewer than 2 host ranks (no shm peers, unmeasured)
// give 32 MiB. Measured with tests/perf/compare-peers.sh -B (2-rank allreduce of 16 MiB 1.61-1.72 -> 1.20-1.24 ms
// with a 32 MiB L3).
uint64_t AutoNtStoresBytes(uint64_t llc_bytes, int host_ranks);

// Bytes of each shm ring (one per other rank of a communicator on the node) for HCCL_BUFFSIZE = `buffsize_bytes`
// shared among them: at most 4 MiB (a longer ring only spreads the stream over more cache lines and page faults;
// longer messages are staged through it in pieces), and at most 1 MiB when the communicator's `host_ranks` on the
// node outnumber its `host_cpus` — a writer may run a whole ring ahead of a reader waiting for its CPU, and what
// it wrote then comes back from memory rather than the cache (4 ranks on 2 CPUs: most collectives 10-50% faster
// at 256 KiB - 16 MiB, even or mixed within noise at 32-64 MiB, tests/perf/compare-peers.sh -B). The communicator
// passes the fewest CPUs any of its local ranks sees, so all of them map the same layout. Oversubscribed, a rank's
// inbound rings also share 16 MiB (at least 64 KiB each): 18 or more ranks then get shorter rings, so the node's shm
// grows like 16 MiB x ranks rather than 1 MiB x ranks^2 (32 ranks: 512 MiB instead of 1 GiB, 128 ranks 2 GiB
// instead of 16 GiB), and creating and zeroing it no longer dominates init (32 ranks on 2 CPUs, allreduce
// 256 KiB - 4 MiB: within noise of 1 MiB rings, tests/perf/init_time.sh for the init).
// REQUIRES: host_ranks >= 2, host_cpus >= 1.
size_t ShmRingBytes(uint64_t buffsize_bytes, int host_ranks, int host_cpus);

}  // namespace hccltune

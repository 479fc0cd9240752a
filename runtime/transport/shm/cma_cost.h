// What a single copy (process_vm_readv, CMA) costs on this machine against a plain copy, and the smallest shm
// message worth single-copying that follows from it.
//
// Why measured: the kernel pins every 4 KiB page it copies, and what that costs next to a memcpy differs by
// machine. On the reference Intel VM (memcpy ~6 GB/s from memory) a 64 KiB process_vm_readv took ~2x a memcpy
// and single copy won from 8 KiB messages; on an AMD EPYC VM (memcpy
// 65-130 GB/s in cache) it took 8-20x, and two copies through the ring won up to 2-4 MiB messages — 2-2.5x at
// 64 KiB - 2 MiB for 4-rank broadcast and allgather (tests/perf/compare-peers.sh). Single copy still wins there
// for large buffers, which HCCL_TUNE_THP puts in 2 MiB pages (one pin per 2 MiB).
//
// Thread-safety: SingleCopyCostRatio measures once per process (thread-safe static); the rest are pure.
#pragma once

#include <cstddef>

namespace hccltune {

// Time of a 64 KiB process_vm_readv from this process's own 4 KiB pages divided by a memcpy of the same bytes
// (the best of several interleaved tries, caches warm; ~0.1-0.5 ms once per process). 0 when the kernel refuses
// process_vm_readv (single copy is then off anyway: the per-peer probe fails the same way).
double SingleCopyCostRatio();

// A single copy costing more than this many memcpys of the same bytes is "expensive" (pinning dominates).
inline constexpr double kExpensiveSingleCopyRatio = 4.0;

// The smallest message to single-copy (ShmOptions::single_copy_min_bytes) for a measured `ratio`: cheap (or
// unknown, 0) → 8 KiB, 16 KiB when the node's ranks outnumber its CPUs (as measured on the Intel VM);
// expensive → 4 MiB, 8 MiB oversubscribed (the AMD VM's crossovers).
size_t SingleCopyMinBytes(double ratio, bool oversubscribed);

}  // namespace hccltune

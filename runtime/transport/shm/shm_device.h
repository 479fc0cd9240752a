// The shm Device (runtime/transport/device.h): links between the ranks of one node through ShmDomain, their
// doorbell and mailbox, and symmetric memory (SymmetricMemory).
//
// Address block: {"cpus": HostCpus(), "segment": the name Start gives this rank's segment} — every local rank maps
// the same ring layout, so the ring size follows the fewest CPUs any local rank sees (containers of one pod may be
// shown different counts). Start, with more than one rank on the node: sizes the rings (HCCL_BUFFSIZE,
// ShmRingBytes), sets the single-copy threshold (HCCL_TUNE_SINGLE_COPY, or measured: cma_cost.h), creates this
// rank's segment and maps the other local ranks' segments, named in their blocks, as each appears finished in
// /dev/shm (no store requests), then waits until every local peer has mapped its own segment (the
// count in the segment's header) and unlinks its name, so nothing is left in /dev/shm after a SIGKILL.
//
// Thread-safety: as every Device.
#pragma once

#include <memory>

#include "runtime/transport/device.h"

namespace hccltune::transport {

std::unique_ptr<Device> NewShmDevice(const DeviceContext& ctx);

}  // namespace hccltune::transport

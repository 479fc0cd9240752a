// The ucx Device (runtime/transport/device.h): links to every rank through UCX (UCP tag matching), for
// link=ucx and link=ucx@SUBNET. Never chosen by link=auto (tcp, earlier in the preference order, reaches every
// rank); RDMA links (roce, ib) are not served yet.
//
// Made: nothing of UCX yet (a communicator that never uses link=ucx pays nothing). Address block: this rank's pid
// and IPv4 interfaces. Start: every rank's block (CheckLink: ucx@SUBNET needs an interface in SUBNET on every
// rank, the same verdict everywhere). Connect, the first time for a network: a UcxWorker (ucx_worker.h; for
// ucx@SUBNET with NET_DEVICES set to this node's netdev in the subnet), whose worker address goes into the
// rendezvous store ("ucx/<network>/<rank>"); then, per (peer, lanes), a UcxPair (ucx_pair.h) from the peer's
// address, waiting for it at most HCCL_CONNECT_TIMEOUT (and, inside a call, HCCL_EXEC_TIMEOUT), asking the
// context's probe. Endpoints ask for UCX's peer failure handling; when no transport UCX_TLS allows offers it
// (UCX 1.13's shared memory has none) the device makes its endpoints without it, says so once in the log, and
// dead peers are then found by their process (same node) or by HCCL_EXEC_TIMEOUT. One log line per connect
// names the transport and device each peer's endpoint uses.
//
// Thread-safety: as every Device.
#pragma once

#include <memory>

#include "runtime/transport/device.h"

namespace hccltune::transport {

std::unique_ptr<Device> NewUcxDevice(const DeviceContext& ctx);

}  // namespace hccltune::transport

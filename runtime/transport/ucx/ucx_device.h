// The ucx Devices (runtime/transport/device.h): links to every rank through UCX (UCP tag matching), for
// link=ucx and link=ucx@SUBNET, and the RDMA links roce, roce@SUBNET, ib and ib@SUBNET (one device each for roce
// and ib, over the node's RDMA ports from libibverbs, runtime/net/rdma.h). The ucx device is never chosen by
// link=auto (tcp, earlier in the preference order, reaches every rank); roce or ib is, for a peer on another
// node, when both ranks have a usable port of its link layer on a common network and that network is the best
// they share (PreferredRdmaLink, runtime/net/rdma_links.h).
//
// roce / ib: the address block is the node's RDMA port count and the networks its usable ports reach (active,
// allowed by HCCL_TUNE_IB_HCA; both link layers, so that auto weighs them against each other); CheckLink refuses a
// subnet where some rank has no such port (CheckRdmaLink), the same verdict on every rank. The UCP context of a network
// has NET_DEVICES set to this rank's port there (ChooseRdmaPort: nearest NUMA node first, spread by local rank), TLS to
// UCX's RDMA transports, and the GID index, traffic class and service level (UcxRdmaSettings). Plain roce / ib: each
// pair runs on the best network of that link layer both ends reach, a context per network.
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
#include <vector>

#include "runtime/net/rdma.h"
#include "runtime/transport/device.h"

namespace hccltune::transport {

// The ucx, roce and ib devices, in that order (this node's RDMA ports read once for both RDMA devices; ports
// that cannot be read are logged and leave roce and ib without ports).
std::vector<std::unique_ptr<Device>> NewUcxDevices(const DeviceContext& ctx);

// A roce or ib device over the given ports (NewUcxDevices reads them from libibverbs; tests give a fake list).
std::unique_ptr<Device> NewUcxRdmaDevice(const DeviceContext& ctx, LinkKind kind, std::vector<RdmaPort> ports);

}  // namespace hccltune::transport

// The tcp Device (runtime/transport/device.h): links to every rank through TcpDomain.
//
// Made: TcpDomain::Create starts listening (HCCL_SOCKET_IFNAME checked there). Address block: its port, this
// rank's interfaces and whether HCCL_SOCKET_IFNAME is set (TcpInfoToJson). Start: every rank's block becomes the
// domain's peer table (whether a peer shares this node decides loopback); Addresses(rank) are a rank's
// non-loopback interface addresses, the topology's inter-node networks. Connect connects a group's links for a
// (network, channels) key on first use (TcpDomain::Connect), asking the context's probe while it waits.
//
// Thread-safety: as every Device.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/transport/device.h"

namespace hccltune::transport {

absl::StatusOr<std::unique_ptr<Device>> NewTcpDevice(const DeviceContext& ctx);

}  // namespace hccltune::transport

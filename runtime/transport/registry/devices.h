// The device registry: the one place that names every concrete transport. A communicator asks it for its
// devices (runtime/transport/device.h) and from then on sees only the Device interface, so runtime/api includes
// no concrete transport (tests/style/layers.txt enforces it). A new transport kind is one more line here, in its
// place in the order of preference.
//
// Thread-safety: CreateDevices is reentrant (each call makes its own devices).
#pragma once

#include "absl/status/statusor.h"
#include "runtime/transport/device.h"

namespace hccltune::transport {

// Every device of this build for one communicator instance, in order of preference: shm (the ranks of one node),
// then tcp (every rank), then ucx (every rank, for link=ucx; in builds that found UCX). Fails when a device cannot be
// made (TCP: no port to listen on, or HCCL_SOCKET_IFNAME names no interface of this node).
absl::StatusOr<DeviceSet> CreateDevices(const DeviceContext& ctx);

}  // namespace hccltune::transport

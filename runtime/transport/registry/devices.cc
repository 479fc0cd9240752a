#include "runtime/transport/registry/devices.h"

#include "runtime/transport/shm/shm_device.h"
#include "runtime/transport/tcp/tcp_device.h"

namespace hccltune::transport {

absl::StatusOr<DeviceSet> CreateDevices(const DeviceContext& ctx) {
  DeviceSet set;
  set.Add(NewShmDevice(ctx));
  auto tcp = NewTcpDevice(ctx);
  if (!tcp.ok()) return tcp.status();
  set.Add(*std::move(tcp));
  return set;
}

}  // namespace hccltune::transport

#include "runtime/transport/registry/devices.h"

#include "runtime/transport/shm/shm_device.h"
#include "runtime/transport/tcp/tcp_device.h"
#if HCCL_TUNE_HAVE_UCX
#include "runtime/transport/ucx/ucx_device.h"
#endif

namespace hccltune::transport {

absl::StatusOr<DeviceSet> CreateDevices(const DeviceContext& ctx) {
  DeviceSet set;
  set.Add(NewShmDevice(ctx));
  auto tcp = NewTcpDevice(ctx);
  if (!tcp.ok()) return tcp.status();
  set.Add(*std::move(tcp));
#if HCCL_TUNE_HAVE_UCX
  // ucx only for link=ucx (tcp, before it, reaches every rank for auto); roce / ib for their links, and for auto
  // to a peer on another node when both have an RDMA port on a common network (Device::PreferredFor).
  for (auto& d : NewUcxDevices(ctx)) set.Add(std::move(d));
#endif
  return set;
}

}  // namespace hccltune::transport

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
  set.Add(NewUcxDevice(ctx));  // only for link=ucx: tcp, before it, reaches every rank for auto
#endif
  return set;
}

}  // namespace hccltune::transport

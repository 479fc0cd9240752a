// A fake RDMA device list for the tests of runtime/net/rdma.h: devices, ports and GID tables as libibverbs would
// report them. No machine here has an RDMA device, so every RDMA decision is tested through this.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/net/rdma.h"

namespace hccltune::testing {

struct FakeDevice {
  std::vector<VerbsPort> ports;  // port 1, 2, ...
  std::vector<VerbsGid> gids;
  int numa = -1;
  std::map<int, std::vector<std::string>> netdevs;  // port -> IPoIB netdevs
  bool broken = false;                              // every query fails
};

class FakeVerbs final : public VerbsApi {
 public:
  std::map<std::string, FakeDevice> devices;

  std::vector<std::string> Devices() override {
    std::vector<std::string> out;
    for (const auto& [name, d] : devices) out.push_back(name);
    return out;
  }
  absl::StatusOr<int> PortCount(const std::string& device) override {
    if (devices.at(device).broken) return absl::UnavailableError(absl::StrCat(device, ": ibv_query_device failed"));
    return static_cast<int>(devices.at(device).ports.size());
  }
  absl::StatusOr<VerbsPort> QueryPort(const std::string& device, int port) override {
    return devices.at(device).ports.at(static_cast<size_t>(port - 1));
  }
  absl::StatusOr<std::vector<VerbsGid>> GidTable(const std::string& device) override { return devices.at(device).gids; }
  int NumaNode(const std::string& device) override { return devices.at(device).numa; }
  std::vector<std::string> PortNetdevs(const std::string& device, int port) override {
    return devices.at(device).netdevs[port];
  }
};

// ACTIVE (4), Ethernet (2) or InfiniBand (1), 4x (2) EDR (32: 25 Gb/s a lane), MTU 4096 (5).
inline VerbsPort ActivePort(bool ethernet, int state = 4) { return VerbsPort{state, ethernet ? 2 : 1, 32, 2, 5}; }

// A RoCE v2 GID entry for IPv4 `a.b.c.d` on `netdev`.
inline VerbsGid RoceV2Gid(int port, int index, int a, int b, int c, int d, const std::string& netdev) {
  VerbsGid g;
  g.port = port;
  g.index = index;
  g.type = 2;
  g.netdev = netdev;
  g.gid[10] = 0xff;
  g.gid[11] = 0xff;
  g.gid[12] = static_cast<uint8_t>(a);
  g.gid[13] = static_cast<uint8_t>(b);
  g.gid[14] = static_cast<uint8_t>(c);
  g.gid[15] = static_cast<uint8_t>(d);
  return g;
}

}  // namespace hccltune::testing

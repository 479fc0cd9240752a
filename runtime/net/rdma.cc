#include "runtime/net/rdma.h"

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace hccltune {
namespace {

std::string PortState(int state) {
  switch (state) {
    case 0: return "NOP";
    case 1: return "DOWN";
    case 2: return "INIT";
    case 3: return "ARMED";
    case 4: return "ACTIVE";
    case 5: return "ACTIVE_DEFER";
  }
  return absl::StrCat("state ", state);
}

// ibv_port_attr.active_width: 1x, 4x, 8x, 12x, 2x.
int Lanes(int width) {
  switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    case 16: return 2;
  }
  return 0;
}

// ibv_port_attr.active_speed: the data rate of one lane, as ibstat's Rate counts it (SDR 2.5 ... NDR 100).
double LaneGbps(int speed) {
  switch (speed) {
    case 1: return 2.5;    // SDR
    case 2: return 5;      // DDR
    case 4: return 10;     // QDR
    case 8: return 10;     // FDR10
    case 16: return 14;    // FDR
    case 32: return 25;    // EDR
    case 64: return 50;    // HDR
    case 128: return 100;  // NDR
    case 256: return 200;  // XDR
  }
  return 0;
}

// The IPv4 address of a RoCE v2 GID (::ffff:a.b.c.d), or "".
std::string Ipv4OfGid(const std::array<uint8_t, 16>& g) {
  for (int i = 0; i < 10; ++i) {
    if (g[static_cast<size_t>(i)] != 0) return "";
  }
  if (g[10] != 0xff || g[11] != 0xff) return "";
  return absl::StrCat(g[12], ".", g[13], ".", g[14], ".", g[15]);
}

const InterfaceAddress* FindInterface(const std::vector<InterfaceAddress>& interfaces, const std::string& netdev,
                                      const std::string& address) {
  for (const auto& i : interfaces) {
    if (i.name == netdev && (address.empty() || i.address == address)) return &i;
  }
  return nullptr;
}

// A port's IPv4 networks: its RoCE v2 GID entries (Ethernet), or its IPoIB netdevs' addresses (InfiniBand).
std::vector<RdmaAddress> PortAddresses(VerbsApi& api, const RdmaPort& p, const std::vector<VerbsGid>& gids,
                                       const std::vector<InterfaceAddress>& interfaces) {
  std::vector<RdmaAddress> out;
  if (p.link == "roce") {
    for (const VerbsGid& g : gids) {
      const std::string ip = Ipv4OfGid(g.gid);
      if (g.port != p.port || g.type != 2 || ip.empty()) continue;
      const InterfaceAddress* i = FindInterface(interfaces, g.netdev, ip);
      out.push_back(RdmaAddress{g.netdev, ip, i != nullptr ? i->Subnet() : ip + "/32", g.index});
    }
    return out;
  }
  for (const std::string& netdev : api.PortNetdevs(p.device, p.port)) {
    for (const auto& i : interfaces) {
      if (i.name == netdev) out.push_back(RdmaAddress{netdev, i.address, i.Subnet(), -1});
    }
  }
  return out;
}

}  // namespace

std::string RdmaPort::Name() const { return absl::StrCat(device, ":", port); }

absl::StatusOr<std::vector<RdmaPort>> ListRdmaPorts(VerbsApi& api, const std::vector<InterfaceAddress>& interfaces) {
  std::vector<RdmaPort> out;
  for (const std::string& device : api.Devices()) {
    auto count = api.PortCount(device);
    if (!count.ok()) return count.status();
    auto gids = api.GidTable(device);
    if (!gids.ok()) return gids.status();
    const int numa = api.NumaNode(device);
    for (int port = 1; port <= *count; ++port) {
      auto a = api.QueryPort(device, port);
      if (!a.ok()) return a.status();
      RdmaPort p;
      p.device = device;
      p.port = port;
      p.state = PortState(a->state);
      p.active = a->state == 4;
      p.link = a->link_layer == 2 ? "roce" : "ib";
      p.lanes = Lanes(a->active_width);
      p.lane_gbps = LaneGbps(a->active_speed);
      p.gbps = p.lanes * p.lane_gbps;
      p.mtu = a->active_mtu >= 1 && a->active_mtu <= 5 ? 128 << a->active_mtu : 0;
      p.numa_node = numa;
      p.addresses = PortAddresses(api, p, *gids, interfaces);
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<InterLink> UsableRdmaLinks(const std::vector<RdmaPort>& ports, const HcaList& hca) {
  std::map<std::pair<std::string, std::string>, double> best;
  for (const RdmaPort& p : ports) {
    if (!p.active || !hca.Allows(p.device, p.port)) continue;
    for (const RdmaAddress& a : p.addresses) {
      double& g = best[{p.link, a.subnet}];
      g = std::max(g, p.gbps);
    }
  }
  std::vector<InterLink> out;
  for (const auto& [key, gbps] : best) out.push_back(InterLink{key.first, key.second, gbps});
  return out;
}

std::vector<std::string> DescribeRdmaPorts(const std::vector<RdmaPort>& ports) {
  if (ports.empty()) return {"no RDMA device"};
  std::vector<std::string> out;
  for (const RdmaPort& p : ports) {
    std::vector<std::string> nets;
    for (const RdmaAddress& a : p.addresses) {
      nets.push_back(a.gid_index >= 0 ? absl::StrCat(a.subnet, " via ", a.netdev, " GID ", a.gid_index)
                                      : absl::StrCat(a.subnet, " via ", a.netdev));
    }
    out.push_back(absl::StrFormat("%s %s %s %dx %g Gb/s (%g Gb/s) MTU %d NUMA %d: %s", p.Name(), p.state,
                                  p.link == "roce" ? "RoCE" : "InfiniBand", p.lanes, p.lane_gbps, p.gbps, p.mtu,
                                  p.numa_node, nets.empty() ? "no IPv4 network" : absl::StrJoin(nets, ", ")));
  }
  return out;
}

absl::StatusOr<RdmaChoice> ChooseRdmaPort(const std::vector<RdmaPort>& ports, const HcaList& hca,
                                          const std::string& link, const std::string& subnet, int numa_node,
                                          int local_rank) {
  std::vector<RdmaChoice> near, far;
  for (const RdmaPort& p : ports) {
    if (p.link != link || !p.active || !hca.Allows(p.device, p.port)) continue;
    for (const RdmaAddress& a : p.addresses) {
      if (a.subnet != subnet) continue;
      const bool same = numa_node >= 0 && p.numa_node == numa_node;
      (same ? near : far).push_back(RdmaChoice{p.Name(), a.gid_index});
      break;
    }
  }
  const std::vector<RdmaChoice>& pick = near.empty() ? far : near;
  if (pick.empty()) {
    const std::string what = link == "roce" ? "RoCE" : "InfiniBand";
    const std::vector<std::string> have = DescribeRdmaPorts(ports);
    return absl::InvalidArgumentError(
        absl::StrCat("link=", link, "@", subnet, ": no active ", what, " port in ", subnet,
                     hca.items.empty() ? "" : " that HCCL_TUNE_IB_HCA=", hca.ToString(),
                     hca.items.empty() ? "" : " allows", " on this node (", absl::StrJoin(have, "; "), ")"));
  }
  return pick[static_cast<size_t>(std::max(local_rank, 0)) % pick.size()];
}

absl::StatusOr<std::string> PortForAddress(const std::vector<RdmaPort>& ports, const std::string& device_ip) {
  std::vector<std::string> have;
  for (const RdmaPort& p : ports) {
    for (const RdmaAddress& a : p.addresses) {
      if (a.address == device_ip) return p.Name();
      have.push_back(absl::StrCat(p.Name(), " ", a.address));
    }
  }
  return absl::NotFoundError(absl::StrCat("device_ip ", device_ip, " is on no RDMA port of this node (",
                                          ports.empty()  ? "no RDMA device"
                                          : have.empty() ? "its ports carry no IPv4 address"
                                                         : absl::StrJoin(have, ", "),
                                          ")"));
}

int CurrentNumaNode() {
  const int cpu = ::sched_getcpu();
  if (cpu < 0) return -1;
  std::error_code ec;
  const std::filesystem::path dir = absl::StrCat("/sys/devices/system/cpu/cpu", cpu);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    int node = -1;
    if (name.rfind("node", 0) == 0 && absl::SimpleAtoi(name.substr(4), &node)) return node;
  }
  return -1;
}

}  // namespace hccltune

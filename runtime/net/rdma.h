// RDMA NIC facts (libibverbs) and the choices made from them: which port a roce@SUBNET / ib@SUBNET link uses on
// this node, which RDMA network link=auto prefers between two nodes, which port carries a rank table's device_ip.
//
// The seam: everything read from libibverbs and sysfs goes through VerbsApi (the device list, ibv_query_device's
// port count, ibv_query_port, ibv_query_gid_table, the device's NUMA node and a port's netdevs from sysfs).
// NewLibibverbsApi() is the real one; tests pass a fake device list. Everything else here is pure.
//
// Thread-safety: VerbsApi implementations are used by one thread at a time; the functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/rdma_env.h"
#include "runtime/net/interfaces.h"

namespace hccltune {

// ibv_query_port's answer, as libibverbs' enums (state: ibv_port_state, 4 = ACTIVE; link_layer: 1 InfiniBand,
// 2 Ethernet; active_speed, active_width, active_mtu: ibv's encodings).
struct VerbsPort {
  int state = 0;
  int link_layer = 0;
  int active_speed = 0;
  int active_width = 0;
  int active_mtu = 0;
};

// One valid GID table entry (ibv_query_gid_table): type 0 = IB, 1 = RoCE v1, 2 = RoCE v2; netdev from its
// ndev_ifindex ("" when none).
struct VerbsGid {
  int port = 0;
  int index = 0;
  std::array<uint8_t, 16> gid{};
  int type = 0;
  std::string netdev;
};

class VerbsApi {
 public:
  virtual ~VerbsApi() = default;
  // The RDMA devices' names (ibv_get_device_list); empty when there are none or the kernel has no RDMA support.
  virtual std::vector<std::string> Devices() = 0;
  // Errors name the device and the call.
  virtual absl::StatusOr<int> PortCount(const std::string& device) = 0;
  virtual absl::StatusOr<VerbsPort> QueryPort(const std::string& device, int port) = 0;
  virtual absl::StatusOr<std::vector<VerbsGid>> GidTable(const std::string& device) = 0;
  // The device's NUMA node (sysfs device/numa_node), -1 when unknown.
  virtual int NumaNode(const std::string& device) = 0;
  // The netdevs of a port (sysfs device/net/*/dev_port): an InfiniBand port's IPoIB interface.
  virtual std::vector<std::string> PortNetdevs(const std::string& device, int port) = 0;
};

// libibverbs and sysfs.
std::unique_ptr<VerbsApi> NewLibibverbsApi();

// An IPv4 network a port reaches: a RoCE v2 GID entry (gid_index) or an InfiniBand port's IPoIB address
// (gid_index -1).
struct RdmaAddress {
  std::string netdev;
  std::string address;
  std::string subnet;
  int gid_index = -1;
};

struct RdmaPort {
  std::string device;  // mlx5_0
  int port = 1;
  std::string state;  // DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER, NOP
  bool active = false;
  std::string link;  // "roce" (Ethernet link layer) or "ib" (InfiniBand)
  int lanes = 0;     // active width
  double lane_gbps = 0;
  double gbps = 0;  // lanes x lane_gbps: the nominal rate
  int mtu = 0;      // bytes
  std::vector<RdmaAddress> addresses;
  int numa_node = -1;
  std::string Name() const;  // "mlx5_0:1", UCX's NET_DEVICES form
};

// Every port of every device, in device then port order, with the addresses of `interfaces` it carries. A
// device that cannot be opened or queried is an error naming it.
absl::StatusOr<std::vector<RdmaPort>> ListRdmaPorts(VerbsApi& api, const std::vector<InterfaceAddress>& interfaces);

// The networks link=roce/ib may use on this node, as a rank publishes them: one per (link layer, subnet) of the
// active ports `hca` allows, at its fastest port's rate, sorted.
std::vector<InterLink> UsableRdmaLinks(const std::vector<RdmaPort>& ports, const HcaList& hca);

// "no RDMA device", or one line per port: name, state, link layer, width x speed, MTU, NUMA node, and its
// networks ("10.30.0.0/16 via eth2, GID 3").
std::vector<std::string> DescribeRdmaPorts(const std::vector<RdmaPort>& ports);

// What a link=roce@SUBNET / ib@SUBNET (or a network link=auto chose) runs on: UCX's NET_DEVICES and, for RoCE,
// the GID index of the subnet's RoCE v2 entry.
struct RdmaChoice {
  std::string net_device;  // mlx5_0:1
  int gid_index = -1;
};

// This rank's port for `link` ("roce" or "ib") on `subnet`: active, allowed by `hca`, with an address in the
// subnet; among those the ones on this rank's NUMA node (`numa_node`, -1 unknown) come first, and local rank k
// takes the (k mod n)-th of the nearest n, so ranks of one NUMA node spread over its ports. InvalidArgument naming
// the link and subnet (and what the node has) when there is none.
absl::StatusOr<RdmaChoice> ChooseRdmaPort(const std::vector<RdmaPort>& ports, const HcaList& hca,
                                          const std::string& link, const std::string& subnet, int numa_node,
                                          int local_rank);

// The RDMA port that carries `device_ip` (a rank table's), or an error saying which ports and addresses this node
// has when none does.
absl::StatusOr<std::string> PortForAddress(const std::vector<RdmaPort>& ports, const std::string& device_ip);

// The NUMA node of the CPU this process runs on (sysfs), -1 when unknown.
int CurrentNumaNode();

}  // namespace hccltune

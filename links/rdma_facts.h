// This node's RDMA ports as `hccl-tune links` and `hccl-tune algorithms` show them: each device and port, its
// state, link layer (Ethernet = RoCE, InfiniBand), active width and speed, MTU, NUMA node, the networks it
// carries (RoCE v2 IPv4 GID entries, IPoIB addresses) and whether HCCL_TUNE_IB_HCA lets links use it; and where a
// rank table gives this rank a device_ip, the port that carries it (or that none does). Without an RDMA device:
// the one line "no RDMA device".
//
// Thread-safety: pure functions over the facts; ReadRdmaFacts uses `api` (one thread at a time).
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/common/rdma_env.h"
#include "runtime/net/interfaces.h"
#include "runtime/net/rdma.h"

namespace hccltune {

struct RdmaFacts {
  std::vector<RdmaPort> ports;
  std::string error;      // why the ports could not be read ("" when they were)
  HcaList hca;            // HCCL_TUNE_IB_HCA
  std::string device_ip;  // this rank's device_ip from a rank table ("" = none)
};

RdmaFacts ReadRdmaFacts(VerbsApi& api, const std::vector<InterfaceAddress>& interfaces, const HcaList& hca,
                        const std::string& device_ip);

// Text lines: DescribeRdmaPorts (ports HCCL_TUNE_IB_HCA leaves out marked so), then the device_ip match or
// mismatch; "no RDMA device" alone without a port; the error when the ports could not be read.
std::vector<std::string> RdmaFactsLines(const RdmaFacts& facts);

// {"ports": [{"device", "port", "state", "link", "lanes", "lane_gbps", "gbps", "mtu", "numa_node", "allowed",
// "networks": [{"subnet", "address", "netdev", "gid_index"}]}], "summary": RdmaFactsLines, "device_ip" and
// "device_ip_port" (or "device_ip_error") when a rank table gave one}.
nlohmann::json RdmaFactsJson(const RdmaFacts& facts);

}  // namespace hccltune

// Node identity and the facts of the topology fingerprint (docs/CONVENTIONS.md, Node identity / Topology
// fingerprint); the format itself is runtime/common/fingerprint.h.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/common/fingerprint.h"

namespace hccltune {

// HCCL_TUNE_NODE_ID when set, otherwise "<boot id>/<network namespace inode>": two ranks share a node exactly
// when they share both (each network namespace of an emulated cluster is its own node).
std::string LocalNodeId(const Environment& env);

struct TopologyFacts {
  std::vector<int> ranks_per_node;          // one count per node
  std::vector<std::string> intra_links;     // link classes inside a node ("shm" when some node has >= 2 ranks)
  std::vector<std::string> inter_networks;  // TCP: InterNodeNetworks() (multi-node only)
  std::vector<InterLink> rdma_links;        // RDMA ports between nodes: InterNodeRdmaLinks() (multi-node only)
  std::string release;                      // "major.minor"
  std::string runtime = kOwnRuntime;        // the runtime whose collectives are tuned
};

// One interface address of a node: its subnet ("10.77.1.0/24") and address ("10.77.1.2").
struct NodeAddress {
  std::string subnet;
  std::string address;
};

// The networks between nodes (`per_node[n]`: node n's non-loopback addresses), sorted: subnets in which every node
// has an address, minus subnets in which two nodes share an address. A shared address means a host-local network
// (docker0's 172.17.0.1/16 on every machine; several HCCL_TUNE_NODE_ID "nodes" on one host): connecting to it
// reaches the local machine, never the peer, so link=tcp@SUBNET on it cannot work between nodes and the sweep must
// not try it. Empty with fewer than two nodes.
std::vector<std::string> InterNodeNetworks(const std::vector<std::vector<NodeAddress>>& per_node);

// The RDMA links between nodes (`per_node[n]`: node n's active RDMA ports, link "roce" or "ib" with the subnet it
// reaches and its nominal speed), sorted: one per (link layer, subnet) on which every node has a port, at the
// slowest of those ports' speeds (a transfer between two nodes runs at the slower end's rate). Empty with fewer
// than two nodes.
std::vector<InterLink> InterNodeRdmaLinks(const std::vector<std::vector<InterLink>>& per_node);

// The canonical JSON of the facts (format kTopologyFormat, runtime/common/fingerprint.h); its Fingerprint() is the
// topology fingerprint.
std::string TopologyJson(const TopologyFacts& facts);

}  // namespace hccltune

// Topology facts: the networks and RDMA links usable between nodes, the canonical JSON and its fingerprint.
#include "runtime/topology/topology.h"

#include <gtest/gtest.h>

namespace hccltune {
namespace {

using Nodes = std::vector<std::vector<NodeAddress>>;

TEST(InterNodeNetworks, SubnetsEveryNodeHasSorted) {
  const Nodes nodes = {
      {{"10.77.2.0/24", "10.77.2.1"}, {"10.77.1.0/24", "10.77.1.1"}, {"192.168.5.0/24", "192.168.5.1"}},
      {{"10.77.1.0/24", "10.77.1.2"}, {"10.77.2.0/24", "10.77.2.2"}},
      {{"10.77.1.0/24", "10.77.1.3"}, {"10.77.2.0/24", "10.77.2.3"}},
  };
  // 192.168.5.0/24 is on node 0 only.
  EXPECT_EQ(InterNodeNetworks(nodes), (std::vector<std::string>{"10.77.1.0/24", "10.77.2.0/24"}));
}

TEST(InterNodeNetworks, HostLocalNetworksWithOneAddressEverywhereAreNotBetweenNodes) {
  // docker0 is 172.17.0.1/16 on every machine: connecting to it reaches the local host, never the peer.
  const Nodes nodes = {
      {{"10.0.0.0/16", "10.0.0.1"}, {"172.17.0.0/16", "172.17.0.1"}},
      {{"10.0.0.0/16", "10.0.0.2"}, {"172.17.0.0/16", "172.17.0.1"}},
      {{"10.0.0.0/16", "10.0.0.3"}, {"172.17.0.0/16", "172.17.0.9"}},
  };
  EXPECT_EQ(InterNodeNetworks(nodes), (std::vector<std::string>{"10.0.0.0/16"}));
  // Several HCCL_TUNE_NODE_ID "nodes" on one host: every address is shared, no network between them.
  const Nodes one_host = {{{"10.0.0.0/16", "10.0.0.1"}}, {{"10.0.0.0/16", "10.0.0.1"}}};
  EXPECT_TRUE(InterNodeNetworks(one_host).empty());
}

TEST(InterNodeNetworks, SeveralRanksOfOneNodeRepeatItsAddresses) {
  // Every rank publishes its node's interfaces: the same address twice on one node is not "shared".
  const Nodes nodes = {
      {{"10.77.1.0/24", "10.77.1.1"}, {"10.77.1.0/24", "10.77.1.1"}},
      {{"10.77.1.0/24", "10.77.1.2"}, {"10.77.1.0/24", "10.77.1.2"}},
  };
  EXPECT_EQ(InterNodeNetworks(nodes), (std::vector<std::string>{"10.77.1.0/24"}));
}

TEST(InterNodeNetworks, OneNodeHasNone) {
  EXPECT_TRUE(InterNodeNetworks({{{"10.77.1.0/24", "10.77.1.1"}}}).empty());
  EXPECT_TRUE(InterNodeNetworks({}).empty());
}

TEST(TopologyJson, CanonicalAndFingerprinted) {
  TopologyFacts f;
  f.ranks_per_node = {2, 1};
  f.intra_links = {"shm"};
  f.inter_networks = {"10.77.2.0/24", "10.77.1.0/24"};
  f.release = "0.1";
  const std::string json = TopologyJson(f);
  EXPECT_EQ(json,
            R"({"format":2,"inter":[{"link":"tcp","network":"10.77.1.0/24"},{"link":"tcp","network":"10.77.2.0/24"}],)"
            R"("intra":["shm"],"nodes":2,"ranks_per_node":[1,2],"release":"0.1","runtime":"hccl-tune"})");
  EXPECT_EQ(Fingerprint(json).size(), 16u);
  EXPECT_EQ(Fingerprint(json), Sha256Hex(json).substr(0, 16));
}

TEST(TopologyJson, RdmaLinksAndTheRuntime) {
  TopologyFacts f;
  f.ranks_per_node = {4, 4};
  f.intra_links = {"shm"};
  f.inter_networks = {"10.20.0.0/16"};
  f.rdma_links = InterNodeRdmaLinks({{{"roce", "10.30.0.0/16", 100}}, {{"roce", "10.30.0.0/16", 100}}});
  f.release = "0.1";
  f.runtime = "openmpi-4.1";
  EXPECT_EQ(TopologyJson(f),
            R"({"format":2,"inter":[{"gbps":100,"link":"roce","network":"10.30.0.0/16"},)"
            R"({"link":"tcp","network":"10.20.0.0/16"}],"intra":["shm"],"nodes":2,"ranks_per_node":[4,4],)"
            R"("release":"0.1","runtime":"openmpi-4.1"})");
}

using Ports = std::vector<std::vector<InterLink>>;

TEST(InterNodeRdmaLinks, PortsEveryNodeHasAtTheSlowestSpeed) {
  const Ports nodes = {
      // node 0: a 200 Gb/s and a 100 Gb/s RoCE port on one subnet, an IB port, a port only it has
      {{"roce", "10.30.0.0/16", 200},
       {"roce", "10.30.0.0/16", 100},
       {"ib", "fe80::/64", 200},
       {"roce", "10.99.0.0/16", 400}},
      {{"roce", "10.30.0.0/16", 100}, {"ib", "fe80::/64", 100}},
      {{"ib", "fe80::/64", 200}, {"roce", "10.30.0.0/16", 25}, {"roce", "10.30.0.0/16", 100}},
  };
  // Each node's fastest port on a (link, subnet), and the link at the slowest node's: IB at 100 (node 1), RoCE at
  // 100 (node 0 has 200, nodes 1 and 2 have 100); 10.99.0.0/16 is on node 0 only.
  EXPECT_EQ(InterNodeRdmaLinks(nodes),
            (std::vector<InterLink>{{"ib", "fe80::/64", 100}, {"roce", "10.30.0.0/16", 100}}));
}

TEST(InterNodeRdmaLinks, ALinkLayerIsItsOwnNetwork) {
  // RoCE on node 0 and IB on node 1 over the same subnet do not connect.
  EXPECT_TRUE(InterNodeRdmaLinks({{{"roce", "10.30.0.0/16", 100}}, {{"ib", "10.30.0.0/16", 100}}}).empty());
}

TEST(InterNodeRdmaLinks, OneNodeOrNoPortsHasNone) {
  EXPECT_TRUE(InterNodeRdmaLinks({{{"roce", "10.30.0.0/16", 100}}}).empty());
  EXPECT_TRUE(InterNodeRdmaLinks({{}, {}}).empty());
  EXPECT_TRUE(InterNodeRdmaLinks({}).empty());
}

}  // namespace
}  // namespace hccltune

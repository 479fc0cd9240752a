// Topology facts: the networks usable between nodes, the canonical JSON and its fingerprint.
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
            R"({"format":1,"inter":[{"link":"tcp","network":"10.77.1.0/24"},{"link":"tcp","network":"10.77.2.0/24"}],)"
            R"("intra":["shm"],"nodes":2,"ranks_per_node":[1,2],"release":"0.1"})");
  EXPECT_EQ(Fingerprint(json).size(), 16u);
  EXPECT_EQ(Fingerprint(json), Sha256Hex(json).substr(0, 16));
}

}  // namespace
}  // namespace hccltune

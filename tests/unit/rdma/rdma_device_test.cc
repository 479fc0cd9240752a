// The roce and ib devices (runtime/transport/ucx/ucx_device.h) over fake port lists, two nodes of one rank each:
// what a rank publishes, the subnet checks, which device link=auto prefers for a peer on another node, and the
// topology's RDMA links. Nothing of UCX runs before Connect, so none of this needs an RDMA device.
#include <gtest/gtest.h>

#include "runtime/transport/ucx/ucx_device.h"
#include "tests/unit/rdma/fake_verbs.h"

namespace hccltune {
namespace {

using testing::ActivePort;
using testing::FakeVerbs;
using testing::RoceV2Gid;

// A node with a RoCE port on 10.30.0.0/16 (host byte `host`) and, when `with_ib`, an InfiniBand port on
// 10.40.1.0/24 at `ib_speed` (ibv's active_speed: 32 = EDR, 64 = HDR).
std::vector<RdmaPort> NodePorts(int host, bool with_ib, int ib_speed = 32) {
  FakeVerbs v;
  auto& roce = v.devices["mlx5_0"];
  roce.ports = {ActivePort(true)};
  roce.gids = {RoceV2Gid(1, 3, 10, 30, 0, host, "eth2")};
  std::vector<InterfaceAddress> ifs = {{"eth2", absl::StrCat("10.30.0.", host), 16}};
  if (with_ib) {
    auto& ib = v.devices["mlx5_1"];
    ib.ports = {ActivePort(false)};
    ib.ports[0].active_speed = ib_speed;
    ib.netdevs[1] = {"ib0"};
    ifs.push_back({"ib0", absl::StrCat("10.40.1.", host), 24});
  }
  return *ListRdmaPorts(v, ifs);
}

// Rank r's roce and ib devices, started with both ranks' blocks (rank r on node r).
struct TwoNodes {
  std::vector<std::unique_ptr<transport::Device>> roce, ib;
  TwoNodes(const std::vector<std::vector<RdmaPort>>& ports, const HcaList& hca = {}) {
    for (int r = 0; r < 2; ++r) {
      transport::DeviceContext ctx;
      ctx.rank = r;
      ctx.size = 2;
      ctx.env.rdma.hca = hca;
      roce.push_back(transport::NewUcxRdmaDevice(ctx, LinkKind::kRoce, ports[static_cast<size_t>(r)]));
      ib.push_back(transport::NewUcxRdmaDevice(ctx, LinkKind::kIb, ports[static_cast<size_t>(r)]));
    }
    for (auto* set : {&roce, &ib}) {
      const std::vector<std::string> blocks = {(*set)[0]->Block(), (*set)[1]->Block()};
      for (auto& d : *set) EXPECT_TRUE(d->Start(transport::DeviceLayout{{0, 1}, 2}, blocks).ok());
    }
  }
};

TEST(RdmaDevices, AutoPrefersTheBestCommonNetworkOnBothRanks) {
  // RoCE 100 Gb/s and InfiniBand 100 Gb/s on both nodes: a tie, InfiniBand first, on both ends.
  TwoNodes tie({NodePorts(1, true), NodePorts(2, true)});
  EXPECT_TRUE(tie.ib[0]->PreferredFor(1));
  EXPECT_TRUE(tie.ib[1]->PreferredFor(0));
  EXPECT_FALSE(tie.roce[0]->PreferredFor(1));
  EXPECT_FALSE(tie.roce[1]->PreferredFor(0));
  // InfiniBand 4x HDR (200) on one node and 4x FDR (56) on the other runs at 56: RoCE's 100 wins. HDR on both:
  // InfiniBand.
  TwoNodes slow_end({NodePorts(1, true, 64), NodePorts(2, true, 16)});
  EXPECT_TRUE(slow_end.roce[0]->PreferredFor(1));
  EXPECT_TRUE(slow_end.roce[1]->PreferredFor(0));
  EXPECT_FALSE(slow_end.ib[0]->PreferredFor(1));
  TwoNodes fast({NodePorts(1, true, 64), NodePorts(2, true, 64)});
  EXPECT_TRUE(fast.ib[0]->PreferredFor(1));
  EXPECT_FALSE(fast.roce[1]->PreferredFor(0));
  // InfiniBand on one node only: RoCE, the common network.
  TwoNodes roce_only({NodePorts(1, true), NodePorts(2, false)});
  EXPECT_TRUE(roce_only.roce[0]->PreferredFor(1));
  EXPECT_TRUE(roce_only.roce[1]->PreferredFor(0));
  EXPECT_FALSE(roce_only.ib[0]->PreferredFor(1));
  // HCCL_TUNE_IB_HCA leaving the InfiniBand device out on both: RoCE.
  TwoNodes excluded({NodePorts(1, true), NodePorts(2, true)}, *ParseHcaList("^mlx5_1"));
  EXPECT_TRUE(excluded.roce[0]->PreferredFor(1));
  EXPECT_FALSE(excluded.ib[0]->PreferredFor(1));
  // No port on one node: neither (auto takes TCP).
  TwoNodes none({NodePorts(1, true), {}});
  EXPECT_FALSE(none.roce[0]->PreferredFor(1));
  EXPECT_FALSE(none.ib[1]->PreferredFor(0));
}

TEST(RdmaDevices, SubnetChecksAndTopologyLinksFromWhatEachRankPublished) {
  TwoNodes t({NodePorts(1, true), NodePorts(2, false)});
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(t.roce[static_cast<size_t>(r)]->CheckLink(*ParseLink("roce@10.30.0.0/16"), false).ok());
    absl::Status s = t.ib[static_cast<size_t>(r)]->CheckLink(*ParseLink("ib@10.40.1.0/24"), false);
    EXPECT_EQ(s.message(),
              "link=ib@10.40.1.0/24: rank 1 has no active InfiniBand port in 10.40.1.0/24 (its node: "
              "1 RDMA port(s); usable InfiniBand networks: none)");
    s = t.roce[static_cast<size_t>(r)]->CheckLink(*ParseLink("roce@10.99.0.0/16"), false);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(t.roce[0]->RdmaLinks(1), (std::vector<InterLink>{{"roce", "10.30.0.0/16", 100}}));
  EXPECT_EQ(t.ib[0]->RdmaLinks(0), (std::vector<InterLink>{{"ib", "10.40.1.0/24", 100}}));
  EXPECT_TRUE(t.ib[0]->RdmaLinks(1).empty());
}

}  // namespace
}  // namespace hccltune

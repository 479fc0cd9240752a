// The RDMA link names (runtime/net/rdma_links.h): roce@SUBNET / ib@SUBNET checks, plain roce / ib, link=auto's
// RDMA preference between nodes (decided from fake port lists and fake devices), the UCX settings, and on this
// machine (no RDMA device) the refusal of roce@ / ib@ by a real communicator.
#include "runtime/net/rdma_links.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/transport/device.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

const InterLink kRoce100{"roce", "10.30.0.0/16", 100};
const InterLink kRoce200{"roce", "10.31.0.0/16", 200};
const InterLink kIb100{"ib", "10.40.1.0/24", 100};

RdmaPeer Peer(std::vector<InterLink> links, int ports = -1) {
  RdmaPeer p;
  p.present = true;
  p.ports = ports >= 0 ? ports : static_cast<int>(links.size());
  p.links = std::move(links);
  return p;
}

TEST(RdmaLinks, AutoPrefersTheFastestCommonRdmaNetworkElseTcp) {
  // Both ends get the same answer, whichever asks.
  auto both = [](const std::vector<InterLink>& a, const std::vector<InterLink>& b) {
    auto ab = PreferredRdmaLink(a, b), ba = PreferredRdmaLink(b, a);
    EXPECT_EQ(ab.has_value(), ba.has_value());
    if (ab && ba) {
      EXPECT_EQ(*ab, *ba);
    }
    return ab;
  };
  EXPECT_EQ(*both({kRoce100, kRoce200}, {kRoce100, kRoce200}), kRoce200);
  // The slower end's rate decides: 200 on one side, 50 on the other.
  EXPECT_EQ(*both({kRoce100, kRoce200}, {kRoce100, {"roce", "10.31.0.0/16", 50}}), kRoce100);
  // A tie: InfiniBand first.
  EXPECT_EQ(*both({kRoce100, kIb100}, {kIb100, kRoce100}), kIb100);
  EXPECT_EQ(*both({kRoce100, kIb100}, {kIb100, kRoce100}), *PreferredRdmaLink({kIb100, kRoce100}, {kRoce100, kIb100}));
  // No common network (different subnets, or one side without ports): TCP.
  EXPECT_FALSE(both({kRoce100}, {kRoce200}));
  EXPECT_FALSE(both({kRoce100}, {}));
  EXPECT_FALSE(both({}, {}));
  // Same subnet, different link layers: not a common network.
  EXPECT_FALSE(both({{"ib", "10.30.0.0/16", 100}}, {kRoce100}));
  // Restricted to a link layer.
  EXPECT_EQ(*PreferredRdmaLink({kRoce100, kIb100}, {kRoce100, kIb100}, "roce"), kRoce100);
}

TEST(RdmaLinks, SubnetLinkNeedsAPortOfThatLinkLayerInItOnEveryRank) {
  const std::vector<RdmaPeer> ok = {Peer({kRoce100, kIb100}), Peer({kRoce100})};
  EXPECT_TRUE(CheckRdmaLink(ok, "roce", "10.30.0.0/16").ok());
  absl::Status s = CheckRdmaLink(ok, "ib", "10.40.1.0/24");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "link=ib@10.40.1.0/24: rank 1 has no active InfiniBand port in 10.40.1.0/24 (its node: 1 RDMA port(s); "
            "usable InfiniBand networks: none)");
  s = CheckRdmaLink({Peer({}), Peer({})}, "roce", "10.30.0.0/16");
  EXPECT_EQ(s.message(),
            "link=roce@10.30.0.0/16: rank 0 has no active RoCE port in 10.30.0.0/16 (its node: no RDMA "
            "device)");
  s = CheckRdmaLink({Peer({kRoce100}), RdmaPeer{}}, "roce", "10.30.0.0/16");
  EXPECT_EQ(s.message(), "link=roce@10.30.0.0/16: rank 1 runs a build without RDMA links");
}

TEST(RdmaLinks, PlainLinkNeedsACommonNetworkForEveryTwoRanks) {
  EXPECT_TRUE(CheckRdmaLink({Peer({kRoce100}), Peer({kRoce100, kRoce200}), Peer({kRoce100})}, "roce", "").ok());
  absl::Status s = CheckRdmaLink({Peer({kRoce100}), Peer({kRoce100}), Peer({kRoce200})}, "roce", "");
  EXPECT_EQ(s.message(), "link=roce: ranks 0 and 2 have no RoCE network in common");
  s = CheckRdmaLink({Peer({kRoce100}), Peer({kIb100})}, "roce", "");
  EXPECT_EQ(s.message(),
            "link=roce: rank 1 has no active RoCE port (its node: 1 RDMA port(s); usable RoCE networks: "
            "none)");
}

TEST(RdmaLinks, UcxSettingsRestrictTheContextToThePortAndRdmaTransports) {
  using Settings = std::vector<std::pair<std::string, std::string>>;
  RdmaEnv env;
  EXPECT_EQ(UcxRdmaSettings(RdmaChoice{"mlx5_0:1", 3}, env),
            (Settings{{"NET_DEVICES", "mlx5_0:1"}, {"TLS", "ib"}, {"IB_GID_INDEX", "3"}}));
  EXPECT_EQ(UcxRdmaSettings(RdmaChoice{"mlx5_1:1", -1}, env), (Settings{{"NET_DEVICES", "mlx5_1:1"}, {"TLS", "ib"}}));
  env.gid_index = 5;
  env.tc = 104;
  env.sl = 3;
  EXPECT_EQ(UcxRdmaSettings(RdmaChoice{"mlx5_0:1", 3}, env), (Settings{{"NET_DEVICES", "mlx5_0:1"},
                                                                       {"TLS", "ib"},
                                                                       {"IB_GID_INDEX", "5"},
                                                                       {"IB_TRAFFIC_CLASS", "104"},
                                                                       {"IB_SL", "3"}}));
}

// A device of `kind` that prefers the peers in `preferred` (as an RDMA device does a peer on another node with
// which it shares an RDMA network).
class FakeDevice final : public transport::Device {
 public:
  FakeDevice(LinkKind kind, transport::Scope scope, std::vector<int> preferred)
      : kind_(kind), scope_(scope), preferred_(std::move(preferred)) {}
  LinkKind kind() const override { return kind_; }
  transport::Scope scope() const override { return scope_; }
  std::string Block() const override { return ""; }
  absl::Status Start(const transport::DeviceLayout&, const std::vector<std::string>&) override {
    return absl::OkStatus();
  }
  absl::Status CheckLink(const LinkSpec&, bool) const override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<Pair*>> Connect(const std::vector<int>&, const std::string&, int,
                                             absl::Duration) override {
    return absl::UnimplementedError("fake");
  }
  bool PreferredFor(int peer) const override {
    return std::find(preferred_.begin(), preferred_.end(), peer) != preferred_.end();
  }

 private:
  LinkKind kind_;
  transport::Scope scope_;
  std::vector<int> preferred_;
};

TEST(RdmaLinks, AutoTakesTheDeviceThatPrefersAPeerElseThePreferenceOrder) {
  // Ranks 0, 1 on node 0; 2, 3 on node 1. roce prefers rank 2 (a common RoCE network), not rank 3 (none).
  transport::DeviceSet set;
  set.Add(std::make_unique<FakeDevice>(LinkKind::kShm, transport::Scope::kNode, std::vector<int>{}));
  set.Add(std::make_unique<FakeDevice>(LinkKind::kTcp, transport::Scope::kNetwork, std::vector<int>{}));
  set.Add(std::make_unique<FakeDevice>(LinkKind::kRoce, transport::Scope::kNetwork, std::vector<int>{2}));
  ASSERT_TRUE(
      set.Start(0, transport::DeviceLayout{{0, 0, 1, 1}, 2}, {{"", "", "", ""}, {"", "", "", ""}, {"", "", "", ""}})
          .ok());
  const LinkSpec autolink;
  EXPECT_EQ((*set.For(autolink, 1))->kind(), LinkKind::kShm);
  EXPECT_EQ((*set.For(autolink, 2))->kind(), LinkKind::kRoce);
  EXPECT_EQ((*set.For(autolink, 3))->kind(), LinkKind::kTcp);
  EXPECT_EQ((*set.For(LinkSpec{LinkKind::kTcp, ""}, 2))->kind(), LinkKind::kTcp);  // a named link stays named
}

TEST(RdmaLinks, WithoutAnRdmaDeviceSubnetLinksAreRefusedOnEveryRankNamingTheSubnet) {
  // This machine has no RDMA device: roce@ and ib@ are refused alike on every rank, auto runs as before.
  if (!NewLibibverbsApi()->Devices().empty()) GTEST_SKIP() << "this machine has an RDMA device";
  auto st = testing::RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<int32_t> buf(16, rank + 1);
    for (const char* link : {"roce@10.30.0.0/16", "ib@10.40.1.0/24", "ib"}) {
      absl::Status s = comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum,
                                      {absl::StrCat("ring(link=", link, ")")});
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << link << ": " << s;
#if HCCL_TUNE_HAVE_UCX
      const std::string subnet = std::string(link).find('@') != std::string::npos
                                     ? std::string(link).substr(std::string(link).find('@') + 1)
                                     : "";
      EXPECT_TRUE(testing::Contains(s, absl::StrCat("link=", link, ": rank 0 has no active"))) << s;
      EXPECT_TRUE(testing::Contains(s, subnet)) << s;
      EXPECT_TRUE(testing::Contains(s, "(its node: no RDMA device)")) << s;
#else
      EXPECT_TRUE(testing::Contains(s, "this build has no transport for it")) << s;
#endif
    }
    if (absl::Status s = comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum);
        !s.ok()) {
      return s;
    }
    EXPECT_EQ(buf[15], 3);
    EXPECT_EQ(comm.topology_json().find("roce"), std::string::npos);
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace hccltune

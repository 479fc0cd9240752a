// RDMA NIC facts (runtime/net/rdma.h, links/rdma_facts.h) from a fake device list, the HCCL_TUNE_IB_HCA list and
// the RDMA settings of the environment.
#include <gtest/gtest.h>

#include "links/rdma_facts.h"
#include "runtime/common/config.h"
#include "runtime/net/rdma.h"
#include "tests/unit/rdma/fake_verbs.h"

namespace hccltune {
namespace {

using testing::ActivePort;
using testing::FakeVerbs;
using testing::RoceV2Gid;

// mlx5_0: RoCE, NUMA 0, port 1 on eth2 (10.30.0.5/16, GID 3) and port 2 down; mlx5_1: InfiniBand, NUMA 1, port 1
// with IPoIB ib0 (10.40.1.5/24).
FakeVerbs TwoNics() {
  FakeVerbs v;
  auto& roce = v.devices["mlx5_0"];
  roce.numa = 0;
  roce.ports = {ActivePort(true), ActivePort(true, /*state=*/1)};
  VerbsGid v1 = RoceV2Gid(1, 2, 10, 30, 0, 5, "eth2");
  v1.type = 1;  // RoCE v1: not a RoCE v2 entry
  VerbsGid v6 = RoceV2Gid(1, 1, 0, 0, 0, 0, "eth2");
  v6.gid[0] = 0xfe;  // link-local IPv6: not IPv4
  roce.gids = {v6, v1, RoceV2Gid(1, 3, 10, 30, 0, 5, "eth2")};
  auto& ib = v.devices["mlx5_1"];
  ib.numa = 1;
  ib.ports = {ActivePort(false)};
  ib.netdevs[1] = {"ib0"};
  return v;
}

const std::vector<InterfaceAddress> kInterfaces = {
    {"eth0", "192.168.1.5", 24}, {"eth2", "10.30.0.5", 16}, {"ib0", "10.40.1.5", 24}};

TEST(RdmaPorts, NoDeviceIsSaidSoAndNothingElse) {
  FakeVerbs none;
  auto ports = ListRdmaPorts(none, kInterfaces);
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_TRUE(ports->empty());
  EXPECT_EQ(DescribeRdmaPorts(*ports), std::vector<std::string>{"no RDMA device"});
  EXPECT_TRUE(UsableRdmaLinks(*ports, HcaList{}).empty());
  const RdmaFacts f = ReadRdmaFacts(none, kInterfaces, HcaList{}, "10.30.0.5");
  EXPECT_EQ(RdmaFactsLines(f), std::vector<std::string>{"no RDMA device"});  // no device_ip line without a device
  EXPECT_FALSE(RdmaFactsJson(f).contains("device_ip"));
}

TEST(RdmaPorts, EachPortWithStateLinkLayerSpeedMtuNumaAndNetworks) {
  FakeVerbs v = TwoNics();
  auto ports = ListRdmaPorts(v, kInterfaces);
  ASSERT_TRUE(ports.ok()) << ports.status();
  ASSERT_EQ(ports->size(), 3u);
  const RdmaPort& r = (*ports)[0];
  EXPECT_EQ(r.Name(), "mlx5_0:1");
  EXPECT_TRUE(r.active);
  EXPECT_EQ(r.state, "ACTIVE");
  EXPECT_EQ(r.link, "roce");
  EXPECT_EQ(r.lanes, 4);
  EXPECT_EQ(r.lane_gbps, 25);
  EXPECT_EQ(r.gbps, 100);
  EXPECT_EQ(r.mtu, 4096);
  EXPECT_EQ(r.numa_node, 0);
  ASSERT_EQ(r.addresses.size(), 1u);  // only the RoCE v2 IPv4 entry
  EXPECT_EQ(r.addresses[0].subnet, "10.30.0.0/16");
  EXPECT_EQ(r.addresses[0].netdev, "eth2");
  EXPECT_EQ(r.addresses[0].gid_index, 3);
  EXPECT_EQ((*ports)[1].state, "DOWN");
  EXPECT_FALSE((*ports)[1].active);
  const RdmaPort& ib = (*ports)[2];
  EXPECT_EQ(ib.link, "ib");
  ASSERT_EQ(ib.addresses.size(), 1u);
  EXPECT_EQ(ib.addresses[0].subnet, "10.40.1.0/24");
  EXPECT_EQ(ib.addresses[0].gid_index, -1);
  const auto lines = DescribeRdmaPorts(*ports);
  EXPECT_EQ(lines[0], "mlx5_0:1 ACTIVE RoCE 4x 25 Gb/s (100 Gb/s) MTU 4096 NUMA 0: 10.30.0.0/16 via eth2 GID 3");
  EXPECT_EQ(lines[1], "mlx5_0:2 DOWN RoCE 4x 25 Gb/s (100 Gb/s) MTU 4096 NUMA 0: no IPv4 network");
  EXPECT_EQ(lines[2], "mlx5_1:1 ACTIVE InfiniBand 4x 25 Gb/s (100 Gb/s) MTU 4096 NUMA 1: 10.40.1.0/24 via ib0");
}

TEST(RdmaPorts, ADeviceThatCannotBeQueriedIsAnErrorNamingIt) {
  FakeVerbs v = TwoNics();
  v.devices["mlx5_1"].broken = true;
  auto ports = ListRdmaPorts(v, kInterfaces);
  ASSERT_FALSE(ports.ok());
  EXPECT_NE(ports.status().message().find("mlx5_1"), std::string::npos) << ports.status();
  EXPECT_NE(RdmaFactsLines(ReadRdmaFacts(v, kInterfaces, HcaList{}, ""))[0].find("RDMA ports not read: mlx5_1"),
            std::string::npos);
}

TEST(RdmaPorts, UsableLinksAreActiveAllowedPortsByLinkLayerAndSubnet) {
  FakeVerbs v = TwoNics();
  auto ports = *ListRdmaPorts(v, kInterfaces);
  EXPECT_EQ(UsableRdmaLinks(ports, HcaList{}),
            (std::vector<InterLink>{{"ib", "10.40.1.0/24", 100}, {"roce", "10.30.0.0/16", 100}}));
  EXPECT_EQ(UsableRdmaLinks(ports, *ParseHcaList("^mlx5_1")), (std::vector<InterLink>{{"roce", "10.30.0.0/16", 100}}));
  EXPECT_EQ(UsableRdmaLinks(ports, *ParseHcaList("=mlx5_0:2")), std::vector<InterLink>{});  // port 2 is down
}

TEST(RdmaPorts, ChoosesThePortNearestTheRanksNumaNodeAndSpreadsLocalRanks) {
  // Four RoCE ports on one subnet: mlx5_0 and mlx5_1 on NUMA 0, mlx5_2 and mlx5_3 on NUMA 1.
  FakeVerbs v;
  for (int d = 0; d < 4; ++d) {
    auto& dev = v.devices[absl::StrCat("mlx5_", d)];
    dev.numa = d / 2;
    dev.ports = {ActivePort(true)};
    dev.gids = {RoceV2Gid(1, d + 1, 10, 30, 0, 10 + d, absl::StrCat("eth", d))};
  }
  std::vector<InterfaceAddress> ifs;
  for (int d = 0; d < 4; ++d) ifs.push_back({absl::StrCat("eth", d), absl::StrCat("10.30.0.", 10 + d), 16});
  auto ports = *ListRdmaPorts(v, ifs);
  auto pick = [&](int numa, int local_rank) {
    auto c = ChooseRdmaPort(ports, HcaList{}, "roce", "10.30.0.0/16", numa, local_rank);
    return c.ok() ? absl::StrCat(c->net_device, " gid ", c->gid_index) : std::string(c.status().message());
  };
  EXPECT_EQ(pick(0, 0), "mlx5_0:1 gid 1");
  EXPECT_EQ(pick(0, 1), "mlx5_1:1 gid 2");
  EXPECT_EQ(pick(1, 0), "mlx5_2:1 gid 3");
  EXPECT_EQ(pick(1, 1), "mlx5_3:1 gid 4");
  EXPECT_EQ(pick(-1, 3), "mlx5_3:1 gid 4");  // NUMA unknown: spread over all
  auto c = ChooseRdmaPort(ports, *ParseHcaList("^mlx5_2,mlx5_3"), "roce", "10.30.0.0/16", 1, 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->net_device, "mlx5_0:1");  // NUMA 1's ports left out: the others
}

TEST(RdmaPorts, NoPortOnTheSubnetIsRefusedNamingTheSubnet) {
  FakeVerbs v = TwoNics();
  auto ports = *ListRdmaPorts(v, kInterfaces);
  auto c = ChooseRdmaPort(ports, HcaList{}, "roce", "10.40.1.0/24", 0, 0);  // an InfiniBand subnet
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("link=roce@10.40.1.0/24: no active RoCE port in 10.40.1.0/24"), std::string::npos)
      << c.status();
  auto none = ChooseRdmaPort({}, HcaList{}, "ib", "10.40.1.0/24", 0, 0);
  EXPECT_NE(none.status().message().find("(no RDMA device)"), std::string::npos) << none.status();
  auto excluded = ChooseRdmaPort(ports, *ParseHcaList("^mlx5_1"), "ib", "10.40.1.0/24", 0, 0);
  EXPECT_NE(excluded.status().message().find("that HCCL_TUNE_IB_HCA=^mlx5_1 allows"), std::string::npos)
      << excluded.status();
}

TEST(RdmaPorts, RankTableDeviceIpMatchedToItsPortOrReported) {
  FakeVerbs v = TwoNics();
  auto ports = *ListRdmaPorts(v, kInterfaces);
  EXPECT_EQ(*PortForAddress(ports, "10.30.0.5"), "mlx5_0:1");
  EXPECT_EQ(*PortForAddress(ports, "10.40.1.5"), "mlx5_1:1");
  auto miss = PortForAddress(ports, "192.168.1.5");
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().message(),
            "device_ip 192.168.1.5 is on no RDMA port of this node (mlx5_0:1 10.30.0.5, mlx5_1:1 10.40.1.5)");
  const RdmaFacts f = ReadRdmaFacts(v, kInterfaces, *ParseHcaList("mlx5_0"), "192.168.1.5");
  const auto lines = RdmaFactsLines(f);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[2].find("(left out by HCCL_TUNE_IB_HCA=mlx5_0)"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3].rfind("rank table mismatch: device_ip 192.168.1.5 is on no RDMA port", 0), 0u) << lines[3];
  const auto j = RdmaFactsJson(ReadRdmaFacts(v, kInterfaces, HcaList{}, "10.30.0.5"));
  EXPECT_EQ(j["device_ip_port"], "mlx5_0:1");
  EXPECT_EQ(j["ports"][0]["networks"][0]["gid_index"], 3);
  EXPECT_EQ(j["ports"][2]["link"], "ib");
}

TEST(RdmaPorts, ThisMachinesDeviceListReadsWithoutError) {
  // Whatever the machine has: no device gives the one line, a device gives its ports.
  auto api = NewLibibverbsApi();
  const bool none = api->Devices().empty();
  auto ports = ListRdmaPorts(*api, ListInterfaces());
  ASSERT_TRUE(ports.ok()) << ports.status();
  EXPECT_EQ(ports->empty(), none);
  if (none) {
    EXPECT_EQ(DescribeRdmaPorts(*ports), std::vector<std::string>{"no RDMA device"});
  }
}

TEST(HcaList, NcclIbHcaGrammar) {
  auto prefix = ParseHcaList("mlx5");
  ASSERT_TRUE(prefix.ok());
  EXPECT_TRUE(prefix->Allows("mlx5_0", 1));
  EXPECT_TRUE(prefix->Allows("mlx5_1", 2));
  EXPECT_FALSE(prefix->Allows("bnxt_re0", 1));
  auto exact = *ParseHcaList("=mlx5_0:1,mlx5_1");
  EXPECT_TRUE(exact.Allows("mlx5_0", 1));
  EXPECT_FALSE(exact.Allows("mlx5_0", 2));
  EXPECT_TRUE(exact.Allows("mlx5_1", 2));
  EXPECT_FALSE(exact.Allows("mlx5_10", 1));
  auto excl = *ParseHcaList("^=mlx5_1");
  EXPECT_TRUE(excl.Allows("mlx5_0", 1));
  EXPECT_FALSE(excl.Allows("mlx5_1", 1));
  EXPECT_EQ(excl.ToString(), "^=mlx5_1");
  EXPECT_TRUE(ParseHcaList("")->Allows("anything", 1));
  for (const char* bad : {"^", "mlx5_0:0", "mlx5_0:x", "mlx 5", "mlx5_0,,mlx5_1"}) {
    auto s = ParseHcaList(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("HCCL_TUNE_IB_HCA='"), std::string::npos) << s.status();
  }
}

TEST(RdmaEnvironment, ReadThroughTheOneReaderAndCheckedAgainstTheirRanges) {
  auto e = Environment::LoadFrom(std::map<std::string, std::string>{{"HCCL_TUNE_IB_HCA", "^mlx5_2"},
                                                                    {"HCCL_TUNE_IB_GID_INDEX", "3"},
                                                                    {"HCCL_RDMA_TC", "104"},
                                                                    {"HCCL_RDMA_SL", "5"}});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->rdma.hca.Allows("mlx5_2", 1));
  EXPECT_EQ(e->rdma.gid_index, 3);
  EXPECT_EQ(e->rdma.tc, 104);
  EXPECT_EQ(e->rdma.sl, 5);
  auto unset = Environment::LoadFrom(std::map<std::string, std::string>{});
  EXPECT_FALSE(unset->rdma.gid_index || unset->rdma.tc || unset->rdma.sl);
  EXPECT_TRUE(unset->rdma.hca.items.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {{"HCCL_TUNE_IB_GID_INDEX", "256"},
                                                                {"HCCL_RDMA_TC", "130"},
                                                                {"HCCL_RDMA_TC", "256"},
                                                                {"HCCL_RDMA_SL", "8"},
                                                                {"HCCL_TUNE_IB_HCA", "=:1"}};
  for (const auto& [var, value] : bad) {
    auto s = Environment::LoadFrom(std::map<std::string, std::string>{{var, value}});
    ASSERT_FALSE(s.ok()) << var << "=" << value;
    EXPECT_NE(s.status().message().find(absl::StrCat(var, "='", value, "' is invalid")), std::string::npos)
        << s.status();
  }
}

}  // namespace
}  // namespace hccltune

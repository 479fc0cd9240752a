// hccl-tune doctor's (c) links rule on seeded dumps (tuner/doctor/links_rule.cc): cross-node bytes on a network
// slower than another both nodes share come first with the fix, from the interfaces' speeds or from a stored
// link-inspector table; traffic on the fastest network, unknown rates and shm traffic give no links finding; a
// rank table whose device_ip is not the interface used is named.
#include <gtest/gtest.h>

#include "db/memory_store.h"
#include "tests/unit/doctor/dump_fixture.h"

namespace hccltune::doctor {
namespace {

constexpr char kFast[] = "10.77.1.0/24", kSlow[] = "10.77.2.0/24";

class LinksRuleTest : public DumpFixture {
 protected:
  // Rank r of 2 on node r: fast0 and slow0 (speeds in Mbit/s, null when < 0), `bytes` sent to the other node over
  // `used` (fast0 or slow0), 64 completed 1 MiB allreduces.
  void WriteRank(int r, const std::string& used, uint64_t bytes, double fast_mbps = 2000, double slow_mbps = 200,
                 const std::string& device_ip = "") {
    nlohmann::json entries = nlohmann::json::array();
    for (int k = 1; k <= 64; ++k) entries.push_back(Entry(k, "allreduce", 1 << 20, "completed"));
    nlohmann::json d = Dump(r, 2, entries);
    d["node"] = absl::StrCat("node-", r);
    d["nodes"] = 2;
    d["local_ranks"] = 1;
    d["topology_fingerprint"] = "00000000000000f1";
    const auto speed = [](double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); };
    const std::string fast_ip = absl::StrCat("10.77.1.", r + 1), slow_ip = absl::StrCat("10.77.2.", r + 1);
    d["interfaces"] = {{{"name", "fast0"}, {"address", fast_ip}, {"subnet", kFast}, {"speed_mbps", speed(fast_mbps)}},
                       {{"name", "slow0"}, {"address", slow_ip}, {"subnet", kSlow}, {"speed_mbps", speed(slow_mbps)}},
                       {{"name", "lo"}, {"address", "127.0.0.1"}, {"subnet", "127.0.0.0/8"}, {"speed_mbps", nullptr}}};
    const bool fast = used == "fast0";
    d["links_used"] = {{{"kind", "tcp"},
                        {"interface", used},
                        {"address", fast ? fast_ip : slow_ip},
                        {"subnet", fast ? kFast : kSlow},
                        {"speed_mbps", nullptr},
                        {"bytes_sent", bytes},
                        {"cross_node_bytes", bytes},
                        {"peers", {1 - r}},
                        {"peer_nodes", {1 - r}},
                        {"peer_addresses", nlohmann::json::array()}}};
    d["rank_table"] =
        device_ip.empty() ? nlohmann::json(nullptr) : nlohmann::json{{"device_ip", device_ip}, {"host_nic_ip", ""}};
    Save(d);
  }
  static bool AnyLinks(const std::vector<Finding>& f) {
    return std::any_of(f.begin(), f.end(), [](const Finding& x) { return x.kind == "links"; });
  }
};

TEST_F(LinksRuleTest, CrossNodeBytesOnTheSlowNetworkComeFirstWithTheFix) {
  for (int r : {0, 1}) WriteRank(r, "slow0", 64u << 20);
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "links");
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_NE(f[0].title.find("cross-node traffic (128.0 MiB) went over 10.77.2.0/24 at 0.20 Gbit/s"), std::string::npos)
      << f[0].title;
  EXPECT_NE(f[0].fix.find("HCCL_SOCKET_IFNAME=fast0"), std::string::npos) << f[0].fix;
  EXPECT_NE(f[0].fix.find("link=tcp@10.77.1.0/24"), std::string::npos) << f[0].fix;
  // Evidence: every rank's bytes, and the rates with their source.
  ASSERT_EQ(f[0].evidence.size(), 3u);
  EXPECT_NE(f[0].evidence[0].find("rank 0 sent 64.0 MiB to node 1 over tcp on slow0"), std::string::npos);
  EXPECT_NE(f[0].evidence[1].find("rank 1 sent 64.0 MiB to node 0"), std::string::npos);
  EXPECT_NE(f[0].evidence[2].find("interface speed"), std::string::npos) << f[0].evidence[2];
  // 64 MiB at 0.2 against 2 Gbit/s: 2.4 s more.
  EXPECT_NEAR(f[0].cost, 64.0 * (1 << 20) * 8 * (1 / 0.2e9 - 1 / 2e9), 1e-6);
}

TEST_F(LinksRuleTest, StoredLinkInspectorRatesWinOverUnknownInterfaceSpeeds) {
  for (int r : {0, 1}) WriteRank(r, "slow0", 8u << 20, -1, -1);
  EXPECT_FALSE(AnyLinks(Diagnose()));  // no rate known: silent
  db::InMemoryTuningStore store;
  const nlohmann::json table = {{"ranks", 2},
                                {"links",
                                 {{{"src", 0}, {"dst", 1}, {"network", kFast}, {"bandwidth_gbps", 1.9}},
                                  {{"src", 0}, {"dst", 1}, {"network", kSlow}, {"bandwidth_gbps", 0.19}}}}};
  ASSERT_TRUE(store.PutLinks({"00000000000000f1", table.dump(), 1000, 0}).ok());
  const std::vector<Finding> f = Diagnose({5, &store, "memory"});
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "links");
  EXPECT_NE(f[0].evidence.back().find("10.77.2.0/24: 0.19 Gbit/s (measured by hccl-tune links, stored in memory)"),
            std::string::npos)
      << f[0].evidence.back();
}

TEST_F(LinksRuleTest, TrafficOnTheFastestNetworkIsNoFinding) {
  for (int r : {0, 1}) WriteRank(r, "fast0", 64u << 20);
  const std::vector<Finding> f = Diagnose();
  EXPECT_FALSE(AnyLinks(f));
  for (const Finding& x : f) EXPECT_EQ(x.severity, Severity::kInfo) << x.title;
}

TEST_F(LinksRuleTest, NetworksOfSimilarSpeedAreNoFinding) {
  for (int r : {0, 1}) WriteRank(r, "slow0", 64u << 20, 10000, 10000);
  EXPECT_FALSE(AnyLinks(Diagnose()));
}

TEST_F(LinksRuleTest, ARankTableDeviceIpThatIsNotTheInterfaceUsedIsNamed) {
  WriteRank(0, "fast0", 64u << 20, 2000, 200, "10.77.1.1");
  WriteRank(1, "fast0", 64u << 20, 2000, 200, "10.77.2.2");
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "links");
  EXPECT_EQ(f[0].title, "rank 1 sent cross-node traffic from an interface that is not the rank table's device_ip");
  ASSERT_EQ(f[0].evidence.size(), 1u);
  EXPECT_NE(f[0].evidence[0].find("device_ip 10.77.2.2; its cross-node bytes (64.0 MiB) left through fast0"),
            std::string::npos)
      << f[0].evidence[0];
  EXPECT_NE(f[0].fix.find("HCCL_SOCKET_IFNAME=slow0"), std::string::npos) << f[0].fix;
}

}  // namespace
}  // namespace hccltune::doctor

// The topology fingerprint's format: canonical JSON of format 2, the class, reading format 1, hashes.
#include "runtime/common/fingerprint.h"

#include <gtest/gtest.h>

namespace hccltune {
namespace {

// Hashes below are `printf '%s' JSON | sha256sum | cut -c1-16`; 201f47a09e7228b1 is what releases of format 1
// computed for one node of two ranks (and what their databases hold).
constexpr char kOneByTwo1[] =
    R"({"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1"})";
constexpr char kOneByTwo2[] =
    R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})";
constexpr char kShmClass[] = R"({"format":2,"inter":[],"intra":["shm"],"release":"0.1","runtime":"hccl-tune"})";

TopologyDescription TwoNodesWithRdma() {
  TopologyDescription d;
  d.ranks_per_node = {8, 4};
  d.intra = {"shm"};
  d.inter = {{"roce", "10.30.0.0/16", 100}, {"tcp", "10.20.0.0/16", 0}, {"ib", "fe80::/64", 200}};
  d.release = "0.1";
  return d;
}

TEST(TopologyFingerprint, CanonicalFormat2) {
  const std::string json = CanonicalTopologyJson(TwoNodesWithRdma());
  EXPECT_EQ(json, R"({"format":2,"inter":[{"gbps":200,"link":"ib","network":"fe80::/64"},)"
                  R"({"gbps":100,"link":"roce","network":"10.30.0.0/16"},{"link":"tcp","network":"10.20.0.0/16"}],)"
                  R"("intra":["shm"],"nodes":2,"ranks_per_node":[4,8],"release":"0.1","runtime":"hccl-tune"})");
  auto back = ParseTopologyJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(CanonicalTopologyJson(*back), json);
  EXPECT_EQ(back->inter.size(), 3u);
  EXPECT_EQ(back->runtime, "hccl-tune");
}

TEST(TopologyFingerprint, HashesAreSha256Prefixes) {
  EXPECT_EQ(Fingerprint(kOneByTwo1), "201f47a09e7228b1");
  EXPECT_EQ(Fingerprint(kOneByTwo2), "af19111ba64fafe7");
  EXPECT_EQ(Fingerprint(kShmClass), "0ccf22620ca1e2fc");
  EXPECT_EQ(Sha256Hex("").substr(0, 16), "e3b0c44298fc1c14");
}

TEST(TopologyFingerprint, Format1ReadsAsRuntimeHcclTuneAndWritesBackByteForByte) {
  auto d = ParseTopologyJson(kOneByTwo1);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->runtime, kOwnRuntime);
  EXPECT_EQ(CanonicalTopologyJson(*d), kOneByTwo2);
  EXPECT_EQ(Format1TopologyJson(*d), kOneByTwo1);
  auto keys = CanonicalTopology(kOneByTwo1);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->json, kOneByTwo2);
  EXPECT_EQ(keys->fingerprint, "af19111ba64fafe7");
  EXPECT_EQ(keys->topology_class, "0ccf22620ca1e2fc");
  // Two nodes over TCP, as releases of format 1 wrote them.
  const std::string two1 =
      R"({"format":1,"inter":[{"link":"tcp","network":"10.77.1.0/24"},{"link":"tcp","network":"10.77.2.0/24"}],)"
      R"("intra":["shm"],"nodes":2,"ranks_per_node":[2,2],"release":"0.1"})";
  auto two = ParseTopologyJson(two1);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(Format1TopologyJson(*two), two1);
  EXPECT_EQ(Fingerprint(two1), "6b487fbad99606e2");
}

TEST(TopologyFingerprint, Format1CannotSayRdmaPortsOrPeerRuntimes) {
  EXPECT_FALSE(Format1TopologyJson(TwoNodesWithRdma()).has_value());
  auto d = ParseTopologyJson(kOneByTwo2);
  ASSERT_TRUE(d.ok());
  d->runtime = "openmpi-4.1";
  EXPECT_FALSE(Format1TopologyJson(*d).has_value());
}

TEST(TopologyFingerprint, ClassLeavesOutNodesAndRanks) {
  TopologyDescription small = TwoNodesWithRdma();
  TopologyDescription big = small;
  big.ranks_per_node = {8, 8, 8, 8};
  EXPECT_NE(KeysOf(small).fingerprint, KeysOf(big).fingerprint);
  EXPECT_EQ(KeysOf(small).topology_class, KeysOf(big).topology_class);
  EXPECT_EQ(TopologyClassJson(big),
            R"({"format":2,"inter":[{"gbps":200,"link":"ib","network":"fe80::/64"},)"
            R"({"gbps":100,"link":"roce","network":"10.30.0.0/16"},{"link":"tcp","network":"10.20.0.0/16"}],)"
            R"("intra":["shm"],"release":"0.1","runtime":"hccl-tune"})");
  EXPECT_EQ(KeysOf(big).topology_class, Fingerprint(TopologyClassJson(big)));
  // What is in the class separates classes: the runtime, a port's speed, the release.
  TopologyDescription peer = small;
  peer.runtime = "openmpi-4.1";
  TopologyDescription slower = small;
  slower.inter[0].gbps = 25;
  TopologyDescription next = small;
  next.release = "0.2";
  for (const TopologyDescription& other : {peer, slower, next}) {
    EXPECT_NE(KeysOf(other).topology_class, KeysOf(small).topology_class) << CanonicalTopologyJson(other);
  }
}

TEST(TopologyFingerprint, FractionalPortSpeedsStayExact) {
  TopologyDescription d = TwoNodesWithRdma();
  d.inter = {{"ib", "fe80::/64", 2.5}};
  const std::string json = CanonicalTopologyJson(d);
  EXPECT_NE(json.find(R"("gbps":2.5,)"), std::string::npos) << json;
  auto back = ParseTopologyJson(json);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->inter[0].gbps, 2.5);
}

TEST(TopologyFingerprint, AnyKeyOrderReadsTheSame) {
  auto d = ParseTopologyJson(
      R"({ "runtime": "mpich-4.0", "release": "0.1", "ranks_per_node": [3, 1], "nodes": 2, "intra": ["shm"],)"
      R"( "inter": [{"network": "10.20.0.0/16", "link": "tcp"}], "format": 2 })");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(CanonicalTopologyJson(*d),
            R"({"format":2,"inter":[{"link":"tcp","network":"10.20.0.0/16"}],"intra":["shm"],"nodes":2,)"
            R"("ranks_per_node":[1,3],"release":"0.1","runtime":"mpich-4.0"})");
}

TEST(TopologyFingerprint, MalformedJsonNamesTheField) {
  struct Case {
    const char* json;
    const char* names;
  };
  const Case cases[] = {
      {"not json", "not a JSON object"},
      {R"({"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"0.1"})", "'format'"},
      {R"({"format":2,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"0.1"})", "'runtime'"},
      {R"({"format":2,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"0.1","runtime":"openmpi"})",
       "'runtime'"},
      {R"({"format":2,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"abc","runtime":"hccl-tune"})",
       "'release'"},
      {R"({"format":2,"inter":[],"intra":[],"nodes":2,"ranks_per_node":[1],"release":"0.1","runtime":"hccl-tune"})",
       "'nodes'"},
      {R"({"format":2,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[0],"release":"0.1","runtime":"hccl-tune"})",
       "'ranks_per_node'"},
      {R"({"format":2,"inter":[{"link":"roce","network":"10.0.0.0/8"}],"intra":[],"nodes":1,"ranks_per_node":[1],)"
       R"("release":"0.1","runtime":"hccl-tune"})",
       "'inter[0].gbps'"},
      {R"({"format":2,"inter":[{"gbps":10,"link":"tcp","network":"10.0.0.0/8"}],"intra":[],"nodes":1,)"
       R"("ranks_per_node":[1],"release":"0.1","runtime":"hccl-tune"})",
       "'inter[0].gbps'"},
      {R"({"format":2,"inter":[{"link":"udp","network":"10.0.0.0/8"}],"intra":[],"nodes":1,"ranks_per_node":[1],)"
       R"("release":"0.1","runtime":"hccl-tune"})",
       "'inter[0].link'"},
      // Format 1 knew neither RDMA ports nor a runtime.
      {R"({"format":1,"inter":[{"gbps":100,"link":"roce","network":"10.0.0.0/8"}],"intra":[],"nodes":1,)"
       R"("ranks_per_node":[1],"release":"0.1"})",
       "'inter[0].link'"},
      {R"({"format":1,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"0.1","runtime":"hccl-tune"})",
       "'runtime'"},
      {R"({"format":2,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"0.1","runtime":"hccl-tune",)"
       R"("bandwidth":12})",
       "'bandwidth'"},
  };
  for (const Case& c : cases) {
    auto d = ParseTopologyJson(c.json);
    ASSERT_FALSE(d.ok()) << c.json;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_NE(d.status().message().find(c.names), std::string::npos) << d.status() << " for " << c.json;
  }
}

TEST(TopologyFingerprint, NewerFormatsAreRefusedNamingThem) {
  auto d = ParseTopologyJson(R"({"format":3,"inter":[],"intra":[],"nodes":1,"ranks_per_node":[1],"release":"0.1"})");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("format 3"), std::string::npos) << d.status();
  EXPECT_NE(d.status().message().find("formats 1 to 2"), std::string::npos) << d.status();
}

TEST(TopologyFingerprint, HashValidation) {
  EXPECT_TRUE(ValidateTopologyHash("0123456789abcdef", "class").ok());
  for (const char* bad : {"", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdefa", "0123456789abcdeg"}) {
    auto s = ValidateTopologyHash(bad, "topology class");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("topology class"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace hccltune

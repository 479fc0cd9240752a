// Peer runtimes' configurations (runtime/common/peer_configuration.h): canonical strings, errors, and the store
// keeping them apart from this runtime's tables.
#include "runtime/common/peer_configuration.h"

#include <gtest/gtest.h>

#include "db/memory_store.h"
#include "runtime/common/fingerprint.h"

namespace hccltune {
namespace {

TEST(PeerConfiguration, CanonicalForms) {
  struct Case {
    const char* in;
    const char* canonical;
  } cases[] = {
      {"openmpi:segmented_ring(segment=65536)", "openmpi:segmented_ring(segment=64K)"},
      {"openmpi:ring", "openmpi:ring(segment=0)"},
      {"openmpi:rabenseifner(segment=1024K)", "openmpi:rabenseifner(segment=1M)"},
      {"openmpi:default", "openmpi:default"},
      {"mpich:recursive_doubling", "mpich:recursive_doubling"},
      {"mpich:auto", "mpich:auto"},
  };
  for (const Case& c : cases) {
    auto p = PeerConfiguration::Parse(c.in);
    ASSERT_TRUE(p.ok()) << c.in << ": " << p.status();
    EXPECT_EQ(p->ToString(), c.canonical);
    EXPECT_EQ(PeerConfiguration::Parse(p->ToString())->ToString(), c.canonical);  // printing is a fixed point
    EXPECT_EQ(*CanonicalConfigurationString(c.in), c.canonical);
  }
  EXPECT_TRUE(PeerConfiguration::Parse("openmpi:default")->IsDefault());
  EXPECT_TRUE(PeerConfiguration::Parse("mpich:auto")->IsDefault());
  EXPECT_FALSE(PeerConfiguration::Parse("openmpi:ring")->IsDefault());
  EXPECT_EQ(*CanonicalConfigurationString("ring(chunk=1024K)"), "ring(chunk=1M,channels=1,link=auto)");
}

TEST(PeerConfiguration, ErrorsNameTheProblem) {
  struct Case {
    const char* in;
    const char* says;
  } cases[] = {
      {"nccl:ring", "unknown runtime"},
      {"mpich:ring(segment=8K)", "take no parameters"},
      {"openmpi:ring(chunk=8K)", "accepted: segment"},
      {"openmpi:ring(segment=8Q)", "segment"},
      {"openmpi:Ring", "lower-case"},
      {"openmpi:ring(segment=8K", "missing ')'"},
      {"openmpi:default(segment=8K)", "takes no parameters"},
  };
  for (const Case& c : cases) {
    auto p = PeerConfiguration::Parse(c.in);
    ASSERT_FALSE(p.ok()) << c.in;
    EXPECT_NE(p.status().message().find(c.says), std::string::npos) << c.in << ": " << p.status();
  }
}

TEST(PeerConfiguration, RuntimeNames) {
  EXPECT_EQ(PeerRuntimeName("openmpi-4.1"), "openmpi");
  EXPECT_EQ(PeerRuntimeName("mpich-4.0"), "mpich");
  EXPECT_EQ(PeerRuntimeName("hccl-tune"), "");
  TopologyDescription d;
  d.ranks_per_node = {4};
  d.intra = {"shm"};
  d.release = "0.1";
  EXPECT_TRUE(IsOwnRuntimeTopology(CanonicalTopologyJson(d)));
  d.runtime = "openmpi-4.1";
  EXPECT_FALSE(IsOwnRuntimeTopology(CanonicalTopologyJson(d)));
  EXPECT_FALSE(IsOwnRuntimeTopology("not json"));
}

// A peer's table is stored like ours, under its own fingerprint: the runtime field keeps the two apart.
TEST(PeerConfiguration, StoredUnderThePeersFingerprint) {
  db::InMemoryTuningStore store;
  TopologyDescription d;
  d.ranks_per_node = {4};
  d.intra = {"shm"};
  d.release = "0.1";
  const TopologyKeys own = KeysOf(d);
  d.runtime = "openmpi-4.1";
  const TopologyKeys peer = KeysOf(d);
  ASSERT_NE(own.fingerprint, peer.fingerprint);
  db::TunedEntry e;
  e.key = {Collective::kAllreduce, DataType::kFloat32, 4, {0, kUnbounded}};
  e.configuration = "openmpi:segmented_ring(segment=65536)";
  e.runner_up = "openmpi:default";
  ASSERT_TRUE(store.PutTable({peer.fingerprint, peer.json, ""}, {e}, {}).ok());
  auto t = store.GetTable(peer.fingerprint, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->entries.at(0).configuration, "openmpi:segmented_ring(segment=64K)");
  EXPECT_FALSE(store.GetTable(own.fingerprint, 0).ok());
  e.configuration = "openmpi:ring(chunk=1)";
  auto bad = store.PutTable({peer.fingerprint, peer.json, ""}, {e}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("accepted: segment"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace hccltune

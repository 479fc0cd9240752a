// The PMIx rendezvous' pure parts: the address rank 0 publishes, the one each rank picks, and the PMIx facts
// checked against the launcher's variables.
#include "runtime/bootstrap/pmix_rendezvous.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hccltune {
namespace {

const std::vector<InterfaceAddress> kRankZero = {
    {"eth0", "10.77.1.1", 24}, {"eth1", "192.0.2.2", 24}, {"lo", "127.0.0.1", 8}};

TEST(PmixRendezvous, RankZeroPublishesEveryAddressButLoopback) {
  EXPECT_EQ(PmixAddressValue(kRankZero, 41234), "10.77.1.1,192.0.2.2:41234");
  EXPECT_EQ(PmixAddressValue({{"lo", "127.0.0.1", 8}}, 7), "127.0.0.1:7");
  EXPECT_EQ(PmixAddressValue({}, 7), "127.0.0.1:7");
}

TEST(PmixRendezvous, EachRankPicksAnAddressOnItsOwnSubnet) {
  const std::string value = PmixAddressValue(kRankZero, 41234);
  // Another node on the second network only.
  auto other = ChoosePmixAddress(value, {{"eth0", "192.0.2.9", 24}, {"lo", "127.0.0.1", 8}});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->host, "192.0.2.2");
  EXPECT_EQ(other->port, 41234);
  // Rank 0's own node: its first address.
  auto same = ChoosePmixAddress(value, kRankZero);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->host, "10.77.1.1");
  // No common subnet (routed networks): the first address.
  auto routed = ChoosePmixAddress(value, {{"eth0", "172.16.0.5", 16}});
  ASSERT_TRUE(routed.ok());
  EXPECT_EQ(routed->host, "10.77.1.1");
  // Loopback only, on rank 0's host.
  auto lo = ChoosePmixAddress("127.0.0.1:7", kRankZero);
  ASSERT_TRUE(lo.ok());
  EXPECT_EQ(lo->host, "127.0.0.1");
  for (const char* bad : {"", "10.0.0.1", ":80", "10.0.0.1:0", "10.0.0.1:70000", "10.0.0.1:x", ",:80"}) {
    auto r = ChoosePmixAddress(bad, kRankZero);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("is '") + bad + "': expected ADDRESS[,ADDRESS...]:PORT"),
              std::string::npos)
        << r.status();
  }
}

TEST(PmixRendezvous, FactsFillTheEnvironmentOrMustAgreeWithIt) {
  const PmixFacts facts{"slurm.pmix.7.0", 2, 4, 0, 2};
  Environment alone;
  alone.launcher = "pmix";
  alone.rank = 2;
  auto filled = ApplyPmixFacts(alone, facts);
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_EQ(*filled->rank, 2);
  EXPECT_EQ(*filled->world_size, 4);
  EXPECT_EQ(*filled->local_rank, 0);
  EXPECT_EQ(*filled->local_world_size, 2);
  EXPECT_NE(filled->launcher_rdzv_origin.find("through PMIx, namespace slurm.pmix.7.0"), std::string::npos);

  Environment slurm;
  slurm.launcher = "slurm";
  slurm.rank = 2;
  slurm.world_size = 4;
  slurm.local_rank = 0;
  slurm.local_world_size = 2;
  EXPECT_TRUE(ApplyPmixFacts(slurm, facts).ok());
  slurm.world_size = 8;
  auto bad = ApplyPmixFacts(slurm, facts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("the PMIx server (namespace slurm.pmix.7.0) gives world size 4, but the slurm "
                                        "variables give 8"),
            std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("HCCL_TUNE_PMIX=off"), std::string::npos);
  slurm.world_size = 4;
  slurm.local_world_size = 3;
  bad = ApplyPmixFacts(slurm, facts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("local size 2, but the slurm variables give 3"), std::string::npos)
      << bad.status();
  // Facts that contradict themselves.
  Environment unknown;
  unknown.launcher = "pmix";
  auto nonsense = ApplyPmixFacts(unknown, PmixFacts{"ns", 4, 4, 0, 1});
  ASSERT_FALSE(nonsense.ok());
  EXPECT_NE(nonsense.status().message().find("gives rank 4 of 4"), std::string::npos) << nonsense.status();
}

}  // namespace
}  // namespace hccltune

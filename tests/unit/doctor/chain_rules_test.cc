// hccl-tune doctor's troubleshooting chain on seeded dumps (tuner/doctor/rules.h): each seeded problem comes first
// with its fix — an algorithm the table measured slower (forced, or a default), buffers over HCCL_BUFFSIZE, ranks
// pinned to one CPU, more ranks than CPUs, a straggler — and a healthy job's timings give nothing above info.
#include <gtest/gtest.h>

#include "db/memory_store.h"
#include "runtime/common/fingerprint.h"
#include "tests/unit/doctor/dump_fixture.h"

namespace hccltune::doctor {
namespace {

constexpr char kOneShot[] = "one_shot(channels=1,link=shm)";
constexpr char kSlowRing[] = "ring(chunk=1M,channels=1,link=shm)";

class ChainRulesTest : public DumpFixture {
 protected:
  // Operations 1..calls on `rank`, every 64th timed (as the recorder does): `ms` long, the k-th starting at
  // k x `period_ms`.
  static nlohmann::json Calls(int calls, double ms, double period_ms = 1, const std::string& source = "default",
                              const std::string& config = kRing, uint64_t bytes = 8) {
    nlohmann::json entries = nlohmann::json::array();
    for (int k = 1; k <= calls; ++k) {
      if (k % 64 == 0) {
        entries.push_back(Timed(k, int64_t(k * period_ms * 1e6), ms, source, config, bytes));
      } else {
        nlohmann::json e = Entry(k, "allreduce", bytes, "completed", source, -1, config);
        e["duration_ms"] = nullptr;
        entries.push_back(e);
      }
    }
    return entries;
  }
  // A store whose table for `fp` (2 ranks) has one_shot winning allreduce [0, 1M) at 10 us against ring's 30 us.
  void SeedTable(db::InMemoryTuningStore* store, std::string* fp) {
    TopologyDescription t;
    t.ranks_per_node = {2};
    t.intra = {"shm"};
    t.release = "0.1";
    const std::string json = CanonicalTopologyJson(t);
    *fp = Fingerprint(json);
    db::TunedEntry e;
    e.key = {Collective::kAllreduce, DataType::kFloat32, 2, ByteRange{0, 1 << 20}};
    e.configuration = kOneShot;
    e.time_us = 10;
    e.sweep_id = "s1";
    ASSERT_TRUE(store->PutTable({*fp, json, ""}, {e}, {}).ok());
    ASSERT_TRUE(store->PutSweep({"s1", "{}", db::SweepStatus::kDone, 1, 1, 2, ""}).ok());
    std::vector<db::SweepSample> samples;
    for (int i = 0; i < 3; ++i) {
      samples.push_back({Collective::kAllreduce, DataType::kFloat32, 2, 8, kOneShot, 10.0 + i, 10, i});
      samples.push_back({Collective::kAllreduce, DataType::kFloat32, 2, 8, kSlowRing, 30.0 + i, 30, i});
    }
    ASSERT_TRUE(store->AddSweepSamples("s1", samples).ok());
  }
};

TEST_F(ChainRulesTest, AForcedAlgorithmTheTableMeasuredSlowerComesFirst) {
  db::InMemoryTuningStore store;
  std::string fp;
  SeedTable(&store, &fp);
  for (int r = 0; r < 2; ++r) {
    nlohmann::json d = Dump(r, 2, Calls(640, 0.03, 1, "HCCL_TUNE_ALGO", "ring(chunk=1M,channels=1,link=auto)"));
    d["topology_fingerprint"] = fp;
    d["settings"]["HCCL_TUNE_ALGO"] = "allreduce:0-=ring";
    Save(d);
  }
  const std::vector<Finding> f = Diagnose({5, &store, "memory"});
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "algorithm");
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_NE(f[0].title.find("(HCCL_TUNE_ALGO), up to 182% slower than the table's winner"), std::string::npos)
      << f[0].title;
  EXPECT_NE(f[0].fix.find("unset HCCL_TUNE_ALGO (it is 'allreduce:0-=ring')"), std::string::npos) << f[0].fix;
  EXPECT_NE(f[0].fix.find(kOneShot), std::string::npos) << f[0].fix << "\n" << FormatFindings(f);
  ASSERT_EQ(f[0].evidence.size(), 1u);
  EXPECT_NE(f[0].evidence[0].find("640 calls ran"), std::string::npos) << f[0].evidence[0];
  // 640 calls x (31 - 11) us.
  EXPECT_NEAR(f[0].cost, 640 * 20e-6, 1e-9);
  for (const Finding& g : f) EXPECT_NE(g.kind, "override") << "the table judged the override: " << g.title;
}

TEST_F(ChainRulesTest, ADefaultTheTableBeatsPointsAtTheTableAndTheWinnerWithin10PercentIsQuiet) {
  db::InMemoryTuningStore store;
  std::string fp;
  SeedTable(&store, &fp);
  for (int r = 0; r < 2; ++r) {
    nlohmann::json d = Dump(r, 2, Calls(640, 0.03, 1, "default", kSlowRing));
    d["topology_fingerprint"] = fp;
    Save(d);
  }
  std::vector<Finding> f = Diagnose({5, &store, "memory"});
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "algorithm");
  EXPECT_NE(f[0].fix.find("the tuned table did not reach the job"), std::string::npos) << f[0].fix;
  for (int r = 0; r < 2; ++r) {
    nlohmann::json d = Dump(r, 2, Calls(640, 0.01, 1, "table", kOneShot));
    d["topology_fingerprint"] = fp;
    Save(d);
  }
  f = Diagnose({5, &store, "memory"});
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].severity, Severity::kInfo) << f[0].title;
}

TEST_F(ChainRulesTest, NoTableForTheTopologyIsSaidAsInfo) {
  db::InMemoryTuningStore store;
  for (int r = 0; r < 2; ++r) {
    nlohmann::json d = Dump(r, 2, Calls(128, 0.01));
    d["topology_fingerprint"] = "0123456789abcdef";
    Save(d);
  }
  const std::vector<Finding> f = Diagnose({5, &store, "memory"});
  bool said = false;
  for (const Finding& g : f) {
    EXPECT_EQ(g.severity, Severity::kInfo) << g.title;
    said = said || g.title.find("no tuned table for topology 0123456789abcdef in memory") != std::string::npos;
  }
  EXPECT_TRUE(said) << FormatFindings(f);
}

TEST_F(ChainRulesTest, BuffersOverHcclBuffsizeNameTheSizeThatAvoidsThem) {
  for (int r = 0; r < 2; ++r) {
    nlohmann::json d = Dump(r, 2, Calls(128, 2, 3, "default", kRing, 8 << 20));
    d["settings"]["HCCL_BUFFSIZE_bytes"] = 1 << 20;
    d["buffer_overflows"] = {
        {{"min_bytes", 8 << 20}, {"max_bytes", 16 << 20}, {"calls", 128}, {"max_need_bytes", 6 << 20}}};
    Save(d);
  }
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "buffers");
  EXPECT_EQ(f[0].title,
            "128 calls needed more scratch than HCCL_BUFFSIZE (1 MB), up to 6M; up to 256.0 ms in those calls");
  EXPECT_EQ(f[0].fix, "HCCL_BUFFSIZE=6 (MB, on every rank) avoids it (the default is 200)");
  ASSERT_EQ(f[0].evidence.size(), 2u);
  EXPECT_EQ(f[0].evidence[1],
            "over shm each rank's ring per peer is min(4M, HCCL_BUFFSIZE / 1) = 1M: larger calls "
            "pass through it in more rounds");
}

TEST_F(ChainRulesTest, TwoRanksPinnedToOneCpuComeFirst) {
  for (int r = 0; r < 2; ++r) {
    nlohmann::json d = Dump(r, 2, Calls(640, 0.5));
    d["cpu"] = {{"affinity", {0}}, {"online", 2}, {"process_cpu_s", 0.5}, {"process_wall_s", 1.0}};
    Save(d);
  }
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "binding");
  EXPECT_EQ(f[0].title, "node node-a: ranks 0, 1 are all pinned to CPU 0; 2 ranks run on 1 CPU");
  EXPECT_EQ(f[0].evidence[0], "rank 0 (pid 1000): CPUs 0; 0.5 s of CPU in 1.0 s (50% of one CPU)");
  EXPECT_NE(f[0].fix.find("taskset -c $LOCAL_RANK"), std::string::npos) << f[0].fix;
}

TEST_F(ChainRulesTest, MoreRanksThanCpusOnANode) {
  for (int r = 0; r < 4; ++r) {
    nlohmann::json d = Dump(r, 4, Calls(64, 0.5));
    d["cpu"] = {{"affinity", {0, 1}}, {"online", 2}};
    Save(d);
  }
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "binding");
  // The node's every CPU is no pin: only the oversubscription is named.
  EXPECT_EQ(f[0].title, "node node-a: 4 ranks run on 2 CPUs");
  EXPECT_NE(f[0].fix.find("at most 2 ranks on this node"), std::string::npos) << f[0].fix;
}

TEST_F(ChainRulesTest, MoreRanksThanCpusThatMostlySleepAreNoFinding) {
  for (int r = 0; r < 3; ++r) {
    nlohmann::json d = Dump(r, 3, Calls(64, 0.5));
    d["cpu"] = {{"affinity", {0, 1}}, {"online", 2}, {"process_cpu_s", 0.06}, {"process_wall_s", 1.2}};
    Save(d);
  }
  for (const Finding& x : Diagnose()) EXPECT_NE(x.kind, "binding") << x.title;
}

TEST_F(ChainRulesTest, AStragglerIsTheRankWithTheShortestDurations) {
  // Rank 2 arrives 2 ms late at every call: its calls take 0.02 ms, the others' 2.02 ms (per call 2.5 ms).
  for (int r = 0; r < 3; ++r) Save(Dump(r, 3, Calls(640, r == 2 ? 0.02 : 2.02, 2.5)));
  const std::vector<Finding> f = Diagnose();
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].kind, "straggler");
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_EQ(f[0].title,
            "rank 2 arrives last at 10 of 10 calls timed on every rank, about 2.0 ms late: about 1.2 s "
            "of waiting for it");
  EXPECT_NE(f[0].fix.find("see what rank 2 does between collectives"), std::string::npos) << f[0].fix;
}

TEST_F(ChainRulesTest, AHealthyJobsTimingsGiveNothingAboveInfo) {
  // Ranks alternate arriving last by a few microseconds; communication is half of each rank's time.
  for (int r = 0; r < 2; ++r) {
    nlohmann::json entries = Calls(640, 0.5);
    for (auto& e : entries) {
      if (e["duration_ms"].is_null()) continue;
      const int k = e["collective_seq_id"].get<int>() / 64;
      const double ms = (k + r) % 2 == 0 ? 0.5 : 0.495;
      e["duration_ms"] = ms;
      e["time_discovered_completed_ns"] = e["time_discovered_started_ns"].get<int64_t>() + int64_t(ms * 1e6);
    }
    Save(Dump(r, 2, entries));
  }
  const std::vector<Finding> f = Diagnose();
  ASSERT_EQ(f.size(), 2u) << FormatFindings(f);
  EXPECT_EQ(f[0].kind, "summary");
  EXPECT_EQ(f[1].kind, "exposure");
  EXPECT_EQ(f[1].severity, Severity::kInfo);
  EXPECT_EQ(f[1].title, "ranks spend 50% of their time blocked in collectives: communication bound (over 30%)");
  EXPECT_NE(f[1].evidence[0].find("rank 0: 577 calls in the 576.5 ms between its first and last timed call; 10 "
                                  "timed"),
            std::string::npos)
      << f[1].evidence[0];
}

}  // namespace
}  // namespace hccltune::doctor

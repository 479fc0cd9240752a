// A new table version takes effect at the same operation on every rank, whatever sequence number each rank is
// at when rank 0 learns of it (one rank is delayed); static mode never switches; the init table is used.
// Exploration plans carried by a table are executed on the same operations by every rank, within their budget,
// and never in static mode.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "runtime/selector/tuning.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

std::shared_ptr<const TunedTable> Table(int64_t version, const char* allreduce_config, int world) {
  auto t = std::make_shared<TunedTable>();
  t->version = version;
  t->content_hash = "v" + std::to_string(version);
  t->entries.push_back(
      {Collective::kAllreduce, DataType::kFloat32, world, {0, kUnbounded}, *Configuration::Parse(allreduce_config)});
  return t;
}

std::atomic<bool> g_publish{false};
std::atomic<bool> g_plan{false};  // tables carry a plan: every 4th call explores one_shot, at most 5 times

std::shared_ptr<const TunedTable> MaybePlan(std::shared_ptr<const TunedTable> t) {
  if (!g_plan.load()) return t;
  auto copy = std::make_shared<TunedTable>(*t);
  copy->entries[0].explore = *Configuration::Parse("one_shot");
  copy->entries[0].explore_every = 4;
  copy->entries[0].explore_calls = 5;
  return copy;
}

class FakeClient final : public TuningClient {
 public:
  explicit FakeClient(int world) : world_(world) {}
  absl::StatusOr<std::shared_ptr<const TunedTable>> FetchTable(absl::Duration) override {
    return MaybePlan(Table(1, "ring(chunk=64K)", world_));
  }
  std::shared_ptr<const TunedTable> LatestTable() override {
    return MaybePlan(g_publish.load() ? Table(2, "recursive_doubling", world_) : Table(1, "ring(chunk=64K)", world_));
  }
  void Report(const RawTimingSample&) override {}

 private:
  int world_;
};

class Recorder : public TimingSink {
 public:
  void Record(const TimingSample& s) override {
    absl::MutexLock l(&mu);
    configs.push_back(s.configuration);
  }
  absl::Mutex mu;
  std::vector<std::string> configs;
};

std::vector<std::vector<std::string>> RunJob(TuneMode mode, int n, int calls, bool plan = false) {
  g_publish = false;
  g_plan = plan;
  InstallTuningClientFactory([](const TuningContext& ctx) { return std::make_unique<FakeClient>(ctx.world_size); });
  std::vector<std::shared_ptr<Recorder>> rec(static_cast<size_t>(n));
  for (auto& r : rec) r = std::make_shared<Recorder>();
  auto st = testing::RunRanks(
      n,
      [&](int rank, Communicator& comm) -> absl::Status {
        comm.SetTimingSink(rec[static_cast<size_t>(rank)]);
        std::vector<float> v(1000, 1.0f);
        for (int i = 0; i < calls; ++i) {
          // The last rank lags behind the others for the first half of the job.
          if (rank == n - 1 && i < calls / 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
          if (rank == 0 && i == 20) g_publish = true;  // rank 0 learns of version 2 mid-run
          if (absl::Status s = comm.Allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
              !s.ok()) {
            return s;
          }
          std::fill(v.begin(), v.end(), 1.0f);
        }
        return absl::OkStatus();
      },
      [mode](int) {
        Environment e = testing::TestEnv();
        e.mode = mode;
        e.sync_interval = 8;
        return e;
      });
  InstallTuningClientFactory(nullptr);
  g_plan = false;
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
  std::vector<std::vector<std::string>> out;
  for (auto& r : rec) {
    absl::MutexLock l(&r->mu);
    out.push_back(r->configs);
  }
  return out;
}

TEST(TableSwitch, EveryRankSwitchesAtTheSameOperation) {
  const int calls = 80;
  auto per_rank = RunJob(TuneMode::kOnline, 3, calls);
  ASSERT_EQ(per_rank[0].size(), static_cast<size_t>(calls));
  for (size_t r = 1; r < per_rank.size(); ++r) EXPECT_EQ(per_rank[r], per_rank[0]) << "rank " << r;
  // Starts on the init table (v1), ends on v2, switches once.
  EXPECT_EQ(per_rank[0].front(), "ring(chunk=64K,channels=1,link=auto)");
  EXPECT_EQ(per_rank[0].back(), "recursive_doubling(channels=1,link=auto)");
  int switches = 0;
  for (size_t i = 1; i < per_rank[0].size(); ++i) switches += per_rank[0][i] != per_rank[0][i - 1];
  EXPECT_EQ(switches, 1);
}

TEST(TableSwitch, StaticModeNeverSwitches) {
  auto per_rank = RunJob(TuneMode::kStatic, 2, 60);
  for (const auto& calls : per_rank) {
    ASSERT_EQ(calls.size(), 60u);
    for (const auto& c : calls) EXPECT_EQ(c, "ring(chunk=64K,channels=1,link=auto)");
  }
}

TEST(TableSwitch, ExplorationPlanRunsOnTheSameOperationsOnEveryRank) {
  const int calls = 80;
  auto per_rank = RunJob(TuneMode::kOnline, 3, calls, /*plan=*/true);
  ASSERT_EQ(per_rank[0].size(), static_cast<size_t>(calls));
  for (size_t r = 1; r < per_rank.size(); ++r) EXPECT_EQ(per_rank[r], per_rank[0]) << "rank " << r;
  // v1 (from init) and v2 (from the switch) each explore at most 5 times, on every 4th call they decide.
  std::vector<size_t> explored;
  for (size_t i = 0; i < per_rank[0].size(); ++i) {
    if (per_rank[0][i] == "one_shot(channels=1,link=auto)") explored.push_back(i);
  }
  ASSERT_GE(explored.size(), 6u);
  EXPECT_LE(explored.size(), 10u);
  EXPECT_EQ(explored[0], 3u);  // the 4th call of the job
  EXPECT_EQ(explored[1], 7u);
  EXPECT_EQ(per_rank[0].back(), "recursive_doubling(channels=1,link=auto)");
}

TEST(TableSwitch, StaticModeNeverExplores) {
  auto per_rank = RunJob(TuneMode::kStatic, 2, 40, /*plan=*/true);
  for (const auto& calls : per_rank) {
    ASSERT_EQ(calls.size(), 40u);
    for (const auto& c : calls) EXPECT_EQ(c, "ring(chunk=64K,channels=1,link=auto)");
  }
}

TEST(TableSwitch, PlanSurvivesTheBroadcastForm) {
  TunedTable t = *Table(3, "ring", 2);
  t.entries[0].explore = *Configuration::Parse("one_shot");
  t.entries[0].explore_every = 8;
  t.entries[0].explore_calls = 64;
  auto back = TunedTable::Deserialize(t.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->entries.size(), 1u);
  ASSERT_TRUE(back->entries[0].explore.has_value());
  EXPECT_EQ(back->entries[0].explore->ToString(), "one_shot(channels=1,link=auto)");
  EXPECT_EQ(back->entries[0].explore_every, 8u);
  EXPECT_EQ(back->entries[0].explore_calls, 64u);
  EXPECT_FALSE(TunedTable::Deserialize("hccltune-table 1\n3\nh\nexplore 8 64 one_shot\n").ok());  // no entry
}

}  // namespace
}  // namespace hccltune

// A new table version takes effect at the same operation on every rank, whatever sequence number each rank is
// at when rank 0 learns of it (one rank is delayed); static mode never switches; the init table is used.
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

class FakeClient final : public TuningClient {
 public:
  explicit FakeClient(int world) : world_(world) {}
  absl::StatusOr<std::shared_ptr<const TunedTable>> FetchTable(absl::Duration) override {
    return Table(1, "ring(chunk=64K)", world_);
  }
  std::shared_ptr<const TunedTable> LatestTable() override {
    return g_publish.load() ? Table(2, "recursive_doubling", world_) : Table(1, "ring(chunk=64K)", world_);
  }
  std::shared_ptr<TimingSink> sink() override { return nullptr; }

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

std::vector<std::vector<std::string>> RunJob(TuneMode mode, int n, int calls) {
  g_publish = false;
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

}  // namespace
}  // namespace hccltune

// The daemon's online policy on an in-memory store: a sustained regression of a table winner publishes a
// version with an exploration plan; the candidate's live timings then decide the winner; short or mild
// slowdowns, far-slower candidates and samples of other configurations change nothing.
#include "daemon/online_policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "daemon/daemon_config.h"
#include "db/memory_store.h"
#include "db/store_util.h"

namespace hccltune::daemon {
namespace {

constexpr char kFp[] = "0123456789abcdef";
constexpr char kRing[] = "ring(chunk=1M,channels=1,link=auto)";
constexpr char kOneShot[] = "one_shot(channels=1,link=auto)";

class OnlinePolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.min_samples = 20;
    options_.window = 40;
    options_.explore_min_samples = 10;
    options_.explore_every = 8;
    options_.explore_calls = 64;
    policy_ = std::make_unique<OnlinePolicy>(
        &store_,
        [this](const db::Topology& t, const std::vector<db::TunedEntry>& e, int64_t expected) {
          db::PutOptions o;
          o.expected_version = expected;
          if (before_publish_) before_publish_();
          return store_.PutTable(t, e, o);
        },
        options_);
    db::TunedEntry e;
    e.key = db::EntryKey{Collective::kAllreduce, DataType::kFloat32, 2, ByteRange{0, 4096}};
    e.configuration = kRing;
    e.time_us = 12;
    e.rank_time_us = 10;
    e.runner_up = kOneShot;
    e.margin = 0.3;  // runner-up measured 1.3x the winner: within explore_max_ratio
    db::TunedEntry other = e;
    other.key.range = ByteRange{4096, kUnbounded};
    other.runner_up.clear();
    const std::string json =
        R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})";
    topo_ = db::Topology{db::Sha256Hex(json).substr(0, 16), json};
    ASSERT_TRUE(store_.PutTable(topo_, {e, other}, db::PutOptions{}).ok());
  }

  void Feed(const std::string& config, double us, int n, uint64_t bytes = 8, Role reporter = Role::kTuner) {
    std::vector<db::LiveSample> v;
    for (int i = 0; i < n; ++i) v.push_back({Collective::kAllreduce, DataType::kFloat32, 2, bytes, config, us, 0});
    policy_->Observe(topo_.fingerprint, v, reporter);
  }
  db::TunedEntry Latest(int64_t* version = nullptr) {
    auto t = store_.GetTable(topo_.fingerprint, 0);
    EXPECT_TRUE(t.ok()) << t.status();
    if (version) *version = t->version;
    return t->entries[0];
  }
  std::vector<PolicyAction> Eval(absl::Time now = absl::Now()) {
    auto r = policy_->Evaluate(now);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<PolicyAction>{};
  }

  db::InMemoryTuningStore store_;
  db::Topology topo_;
  OnlinePolicyOptions options_;
  std::unique_ptr<OnlinePolicy> policy_;
  std::function<void()> before_publish_;  // runs between an evaluation's read and its publish
};

TEST_F(OnlinePolicyTest, HealthyAndTooFewSamplesChangeNothing) {
  Feed(kRing, 11.5, 100);  // 1.15x the baseline: below the 1.2 threshold
  EXPECT_TRUE(Eval().empty());
  Feed(kRing, 30, 15);  // slow, but fewer than min_samples in the window beyond the healthy ones
  EXPECT_TRUE(Eval().empty());
  int64_t v = 0;
  Latest(&v);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(policy_->versions_published(), 0u);
}

// A predicted entry's time is the model's, not a measurement: live calls 3x slower than predicted are no
// regression. The first live median becomes the baseline; regressions are judged against it afterwards.
TEST_F(OnlinePolicyTest, APredictedEntryTakesItsFirstLiveMedianAsBaseline) {
  auto t = store_.GetTable(topo_.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  std::vector<db::TunedEntry> entries = t->entries;
  for (db::TunedEntry& e : entries) {
    e.model_version = 4;
    e.rank_time_us = 0;
    e.samples = 0;
  }
  ASSERT_TRUE(store_.PutTable(topo_, entries, db::PutOptions{}).ok());
  Feed(kRing, 36, 10);  // fewer than min_samples: nothing yet
  EXPECT_TRUE(Eval().empty());
  Feed(kRing, 36, 30);  // 3x the predicted 12 us
  auto actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kBaseline);
  EXPECT_DOUBLE_EQ(actions[0].baseline_us, 36);
  db::TunedEntry now = Latest();
  EXPECT_DOUBLE_EQ(now.rank_time_us, 36);
  EXPECT_EQ(now.model_version, 4);  // still predicted: only its baseline was measured
  EXPECT_FALSE(now.stale);
  EXPECT_TRUE(now.explore.empty());
  Feed(kRing, 38, 40);  // within 1.2x of the live baseline
  EXPECT_TRUE(Eval(absl::Now() + absl::Seconds(options_.cooldown_s + 1)).empty());
  Feed(kRing, 90, 40);  // a real regression against it
  actions = Eval(absl::Now() + absl::Seconds(options_.cooldown_s + 1));
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kExplore);
  EXPECT_DOUBLE_EQ(actions[0].baseline_us, 36);
}

TEST_F(OnlinePolicyTest, RegressionPublishesPlanThenFasterCandidateWins) {
  Feed(kRing, 25, 40);  // 2.5x the per-rank baseline, sustained
  auto actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kExplore);
  int64_t v = 0;
  db::TunedEntry e = Latest(&v);
  EXPECT_EQ(v, 2);
  EXPECT_TRUE(e.stale);
  EXPECT_EQ(e.configuration, kRing);
  EXPECT_EQ(e.explore, kOneShot);
  EXPECT_EQ(e.explore_every, 8u);
  EXPECT_EQ(e.explore_calls, 64u);
  // Not decided until the candidate has samples; samples of other configurations are ignored.
  Feed("recursive_doubling(channels=1,link=auto)", 1, 50);
  Feed(kOneShot, 14, 5);
  Feed(kRing, 25, 10);
  EXPECT_TRUE(Eval().empty());
  Feed(kOneShot, 14, 10);
  actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kSwitch);
  EXPECT_DOUBLE_EQ(actions[0].candidate_live_us, 14);
  e = Latest(&v);
  EXPECT_EQ(v, 3);
  EXPECT_EQ(e.configuration, kOneShot);
  EXPECT_EQ(e.runner_up, kRing);
  EXPECT_FALSE(e.stale);
  EXPECT_TRUE(e.explore.empty());
  EXPECT_DOUBLE_EQ(e.rank_time_us, 14);
  // The new winner at its own baseline is healthy.
  Feed(kOneShot, 14.5, 40);
  EXPECT_TRUE(Eval().empty());
}

// A reader (any job's user) may start the exploration, but its reports alone never install the candidate: whether
// the reader reported the winner's slowdown, the candidate's speed, or both, a faster candidate is "unconfirmed",
// the winner stays and the entry stays stale (for a mini-sweep or a tuner's sweep to measure).
TEST_F(OnlinePolicyTest, ReadersReportsNeverInstallAWinner) {
  struct Case {
    Role winner_reports, candidate_reports;
  };
  for (const Case& c :
       {Case{Role::kReader, Role::kReader}, Case{Role::kTuner, Role::kReader}, Case{Role::kReader, Role::kTuner}}) {
    SetUp();
    Feed(kRing, 25, 40, 8, c.winner_reports);  // a regression, as a reader may report one
    auto actions = Eval();
    ASSERT_EQ(actions.size(), 1u);
    EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kExplore);
    int64_t planned = 0;
    Latest(&planned);
    Feed(kOneShot, 1, 20, 8, c.candidate_reports);  // "the runner-up is 25x faster"
    Feed(kRing, 25, 20, 8, c.winner_reports);
    actions = Eval();
    ASSERT_EQ(actions.size(), 1u);
    EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kUnconfirmed);
    EXPECT_EQ(PolicyActionName(actions[0].kind), "unconfirmed");
    int64_t v = 0;
    const db::TunedEntry e = Latest(&v);
    EXPECT_EQ(v, planned + 1);
    EXPECT_EQ(e.configuration, kRing);
    EXPECT_EQ(e.runner_up, kOneShot);
    EXPECT_TRUE(e.stale);
    EXPECT_TRUE(e.explore.empty());
    EXPECT_DOUBLE_EQ(e.rank_time_us, 10);  // the swept baseline is kept
    // Cool-down: the same reports right after do not start another plan.
    Feed(kRing, 25, 40, 8, c.winner_reports);
    EXPECT_TRUE(Eval().empty());
  }
}

TEST_F(OnlinePolicyTest, SlowerCandidateKeepsWinnerWithNewBaseline) {
  Feed(kRing, 25, 40);
  ASSERT_EQ(Eval().size(), 1u);
  Feed(kOneShot, 40, 12);
  Feed(kRing, 25, 12);
  auto actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kKeep);
  db::TunedEntry e = Latest();
  EXPECT_EQ(e.configuration, kRing);
  EXPECT_FALSE(e.stale);
  EXPECT_TRUE(e.explore.empty());
  EXPECT_DOUBLE_EQ(e.rank_time_us, 25);
  Feed(kRing, 25, 40);  // the new normal is not a regression
  EXPECT_TRUE(Eval().empty());
}

TEST_F(OnlinePolicyTest, ZeroAndNonFiniteDurationsAreIgnoredAndTheEntryIsStillDecided) {
  Feed(kRing, 25, 40);
  ASSERT_EQ(Eval().size(), 1u);  // plan to explore kOneShot
  // Durations no real call has: a candidate median of 0 would make an infinite margin that no table accepts.
  Feed(kOneShot, 0, 12);
  Feed(kOneShot, std::numeric_limits<double>::quiet_NaN(), 3);
  Feed(kOneShot, -1, 3);
  Feed(kRing, 25, 12);
  EXPECT_TRUE(Eval().empty());  // the candidate has no valid samples yet
  EXPECT_EQ(policy_->dropped(), 18u);
  Feed(kOneShot, 14, 12);
  auto actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kSwitch);
  db::TunedEntry e = Latest();
  EXPECT_EQ(e.configuration, kOneShot);
  EXPECT_FALSE(e.stale);
  EXPECT_TRUE(std::isfinite(e.margin));
  EXPECT_NEAR(e.margin, 25.0 / 14 - 1, 1e-9);
}

TEST_F(OnlinePolicyTest, NoCandidateWithinBudgetOnlyMarksStale) {
  Feed(kRing, 30, 40, /*bytes=*/64 << 10);  // the entry without a runner-up
  auto actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kStaleNoCandidate);
  auto t = store_.GetTable(topo_.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->entries[1].stale);
  EXPECT_TRUE(t->entries[1].explore.empty());
  Feed(kRing, 30, 40, 64 << 10);
  EXPECT_TRUE(Eval().empty());  // already stale: no new version
}

TEST_F(OnlinePolicyTest, FarSlowerRunnerUpIsNeverExplored) {
  db::TunedEntry e = Latest();
  e.margin = 3.0;  // runner-up swept at 4x the winner: beyond explore_max_ratio 2
  ASSERT_TRUE(store_.PutTable(topo_, {e}, db::PutOptions{}).ok());
  Feed(kRing, 25, 40);
  auto actions = Eval();
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kStaleNoCandidate);
  EXPECT_TRUE(Latest().explore.empty());
}

TEST_F(OnlinePolicyTest, PlanWithoutSamplesIsWithdrawnAfterTimeout) {
  Feed(kRing, 25, 40);
  const absl::Time t0 = absl::Now();
  ASSERT_EQ(Eval(t0).size(), 1u);
  EXPECT_TRUE(Eval(t0 + absl::Seconds(1)).empty());
  auto actions = Eval(t0 + absl::Seconds(options_.explore_timeout_s + 2));
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kWithdraw);
  db::TunedEntry e = Latest();
  EXPECT_TRUE(e.explore.empty());
  EXPECT_TRUE(e.stale);
}

TEST_F(OnlinePolicyTest, CooldownKeepsADecisionFromBeingJudgedAgainAtOnce) {
  Feed(kRing, 25, 40);
  const absl::Time t0 = absl::Now();
  ASSERT_EQ(Eval(t0).size(), 1u);  // explore one_shot
  Feed(kOneShot, 15, 12);
  Feed(kRing, 25, 12);
  auto actions = Eval(t0 + absl::Seconds(1));
  ASSERT_EQ(actions.size(), 1u);
  ASSERT_EQ(actions[0].kind, PolicyAction::Kind::kSwitch);
  ASSERT_EQ(Latest().configuration, kOneShot);
  // one_shot now runs 2x its new baseline: a regression, but within the cool-down it is not judged...
  Feed(kOneShot, 30, 40);
  EXPECT_TRUE(Eval(t0 + absl::Seconds(2)).empty());
  EXPECT_TRUE(Eval(t0 + absl::Seconds(options_.cooldown_s)).empty());
  EXPECT_FALSE(Latest().stale);
  // ... and after it, it is (runner-up: the old winner, explored again).
  actions = Eval(t0 + absl::Seconds(options_.cooldown_s + 2));
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, PolicyAction::Kind::kExplore);
  EXPECT_EQ(Latest().explore, kRing);
}

TEST(OnlinePolicyFloor, SmallAbsoluteSlowdownsAreNotRegressionsWithAFloor) {
  db::InMemoryTuningStore store;
  OnlinePolicyOptions o;
  o.min_samples = 20;
  o.window = 40;
  o.min_regression_us = 5;
  OnlinePolicy policy(
      &store,
      [&](const db::Topology& t, const std::vector<db::TunedEntry>& e, int64_t expected) {
        db::PutOptions p;
        p.expected_version = expected;
        return store.PutTable(t, e, p);
      },
      o);
  db::TunedEntry e;
  e.key = db::EntryKey{Collective::kAllreduce, DataType::kFloat32, 2, ByteRange{0, kUnbounded}};
  e.configuration = kRing;
  e.time_us = 0.8;
  e.rank_time_us = 0.7;  // an 8 B call swept after a barrier
  const std::string json =
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})";
  const db::Topology topo{db::Sha256Hex(json).substr(0, 16), json};
  ASSERT_TRUE(store.PutTable(topo, {e}, {}).ok());
  auto feed = [&](double us) {
    std::vector<db::LiveSample> v(40, db::LiveSample{Collective::kAllreduce, DataType::kFloat32, 2, 8, kRing, us, 0});
    policy.Observe(topo.fingerprint, v, Role::kTuner);
  };
  feed(3.2);  // 4.6x the baseline but only 2.5 us above it: a tight loop's skew, not a regression
  auto r = policy.Evaluate();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->empty());
  feed(9);  // 6 x and 8.3 us above: a regression
  r = policy.Evaluate();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].kind, PolicyAction::Kind::kStaleNoCandidate);
}

TEST_F(OnlinePolicyTest, ATableChangedBetweenReadAndPublishIsNotOverwritten) {
  Feed(kRing, 25, 40);
  int64_t v0 = 0;
  db::TunedEntry e = Latest(&v0);
  db::TunedEntry swept = e;
  swept.configuration = "recursive_doubling(channels=1,link=auto)";
  swept.sweep_id = "sw-meanwhile";
  swept.measured_unix_ms = 42;
  auto t = store_.GetTable(topo_.fingerprint, 0);
  std::vector<db::TunedEntry> meanwhile = t->entries;
  meanwhile[0] = swept;
  bool written = false;
  before_publish_ = [&] {  // a sweep writes between the policy's read and its write
    if (written) return;
    written = true;
    ASSERT_TRUE(store_.PutTable(topo_, meanwhile, db::PutOptions{}).ok());
  };
  EXPECT_TRUE(Eval().empty());
  EXPECT_EQ(policy_->publish_conflicts(), 1u);
  int64_t v1 = 0;
  EXPECT_EQ(Latest(&v1).configuration, swept.configuration);  // the sweep's table stands
  EXPECT_EQ(v1, v0 + 1);
  // The ring windows measured the entry before the sweep re-measured it: dropped, so nothing is judged.
  EXPECT_TRUE(Eval().empty());
  EXPECT_FALSE(Latest().stale);
}

TEST(OnlinePolicyConfig, ConfigFileKeysAndErrors) {
  DaemonConfig c;
  ASSERT_TRUE(ApplyConfigText("online_regression_ratio = 1.5\nonline_explore_every = 16\nonline_policy = off\n",
                              "test.conf", &c)
                  .ok());
  EXPECT_DOUBLE_EQ(c.online.regression_ratio, 1.5);
  EXPECT_EQ(c.online.explore_every, 16);
  EXPECT_FALSE(c.online.enabled);
  DaemonConfig c1, c2, c3;
  absl::Status s = ApplyConfigText("online_regression_ratio = 0.9\n", "test.conf", &c1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("online_regression_ratio"), std::string::npos) << s;
  s = ApplyConfigText("online_explore_every = 1\n", "test.conf", &c2);
  EXPECT_NE(s.message().find("online_explore_every"), std::string::npos) << s;
  s = ApplyConfigText("online_policy = maybe\n", "test.conf", &c3);
  EXPECT_NE(s.message().find("test.conf:1"), std::string::npos) << s;
  DaemonConfig m;
  ASSERT_TRUE(ApplyConfigText("mini_sweep = off\nmini_sweep_idle_s = 5\nmini_sweep_max_per_hour = 2\n"
                              "online_cooldown_s = 0\n",
                              "test.conf", &m)
                  .ok());
  EXPECT_FALSE(m.mini_sweep.enabled);
  EXPECT_EQ(m.mini_sweep.idle_s, 5);
  EXPECT_EQ(m.mini_sweep.max_per_hour, 2);
  EXPECT_EQ(m.online.cooldown_s, 0);
  DaemonConfig f;
  ASSERT_TRUE(ApplyConfigText("online_min_regression_us = 50\n", "test.conf", &f).ok());
  EXPECT_DOUBLE_EQ(f.online.min_regression_us, 50);
  DaemonConfig m1, m2;
  s = ApplyConfigText("mini_sweep_idle_s = 0\n", "test.conf", &m1);
  EXPECT_NE(s.message().find("mini_sweep_idle_s"), std::string::npos) << s;
  s = ApplyConfigText("online_cooldown_s = -1\n", "test.conf", &m2);
  EXPECT_NE(s.message().find("online_cooldown_s"), std::string::npos) << s;
}

}  // namespace
}  // namespace hccltune::daemon

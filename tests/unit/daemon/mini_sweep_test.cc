// Mini-sweeps of stale single-node entries (daemon/mini_sweep.h): the range merge (only the stale entry is
// replaced, clipped to its range; a re-measured entry drops the result), the sweep child's result, and the
// MiniSweeper with a stand-in sweep command: it starts only on an idle node and a single-node topology, merges
// the winners as one new version, is cancelled by a job that starts reporting, retries later, keeps its budget.
#include "daemon/mini_sweep.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "db/memory_store.h"
#include "db/store_util.h"
#include "db/table_json.h"

namespace hccltune::daemon {
namespace {

constexpr char kRing[] = "ring(chunk=1M,channels=1,link=auto)";
constexpr char kOneShot[] = "one_shot(channels=1,link=auto)";
constexpr char kRd[] = "recursive_doubling(channels=1,link=auto)";

db::TunedEntry Entry(Collective c, DataType t, uint64_t lo, uint64_t hi, const char* cfg, bool stale = false) {
  db::TunedEntry e;
  e.key = db::EntryKey{c, t, 2, ByteRange{lo, hi}};
  e.configuration = cfg;
  e.time_us = 5;
  e.rank_time_us = 4;
  e.sweep_id = "sw-old";
  e.measured_unix_ms = 1000;
  e.stale = stale;
  return e;
}

std::vector<db::TunedEntry> Table() {
  return {Entry(Collective::kAllreduce, DataType::kInt32, 0, 8, kOneShot),
          Entry(Collective::kAllreduce, DataType::kInt32, 8, 16, kRing, /*stale=*/true),
          Entry(Collective::kAllreduce, DataType::kInt32, 16, kUnbounded, kRing),
          Entry(Collective::kAllgather, DataType::kInt32, 0, kUnbounded, kRing)};
}

TEST(MergeRange, ReplacesOnlyTheStaleEntryClippedToItsRange) {
  const auto cur = Table();
  db::TunedEntry fresh = Entry(Collective::kAllreduce, DataType::kInt32, 8, 32, kRd);  // beyond the range
  fresh.rank_time_us = 2.5;
  fresh.sweep_id = "sw-mini";
  db::TunedEntry other = Entry(Collective::kAllgather, DataType::kInt32, 0, 64, kRd);  // another key: ignored
  auto merged = MergeRange(cur, cur[1].key, {fresh, other});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->size(), 4u);
  EXPECT_EQ((*merged)[0], cur[0]);
  EXPECT_EQ((*merged)[2], cur[2]);
  EXPECT_EQ((*merged)[3], cur[3]);
  const db::TunedEntry& m = (*merged)[1];
  EXPECT_EQ(m.key, cur[1].key);  // clipped to [8, 16)
  EXPECT_EQ(m.configuration, kRd);
  EXPECT_FALSE(m.stale);
  EXPECT_DOUBLE_EQ(m.rank_time_us, 2.5);  // the new baseline
  EXPECT_EQ(m.sweep_id, "sw-mini");
}

TEST(MergeRange, SeveralWinnersSplitTheRange) {
  std::vector<db::TunedEntry> cur = {Entry(Collective::kAllreduce, DataType::kFloat32, 1024, 65536, kRing, true)};
  cur[0].explore = kOneShot;  // a plan whose job ended: cleared with the stale mark
  cur[0].explore_every = 4;
  cur[0].explore_calls = 10;
  auto merged = MergeRange(cur, cur[0].key,
                           {Entry(Collective::kAllreduce, DataType::kFloat32, 1024, 4096, kOneShot),
                            Entry(Collective::kAllreduce, DataType::kFloat32, 4096, 131072, kRd)});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->size(), 2u);
  EXPECT_EQ((*merged)[0].key.range, (ByteRange{1024, 4096}));
  EXPECT_EQ((*merged)[1].key.range, (ByteRange{4096, 65536}));
  EXPECT_TRUE((*merged)[1].explore.empty());
  EXPECT_EQ((*merged)[1].explore_every, 0u);
}

TEST(MergeRange, RefusesWhatNoLongerFitsTheTable) {
  auto cur = Table();
  const db::EntryKey key = cur[1].key;
  const std::vector<db::TunedEntry> fresh = {Entry(Collective::kAllreduce, DataType::kInt32, 8, 16, kRd)};
  cur[1].stale = false;  // re-judged meanwhile
  auto r = MergeRange(cur, key, fresh);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("no longer stale"), std::string::npos) << r.status();
  cur[1].stale = true;
  cur[1].key.range.max = 12;  // re-measured with other ranges
  EXPECT_TRUE(absl::IsFailedPrecondition(MergeRange(cur, key, fresh).status()));
  cur = Table();
  auto gap = MergeRange(cur, key, {Entry(Collective::kAllreduce, DataType::kInt32, 8, 12, kRd)});
  EXPECT_TRUE(absl::IsInvalidArgument(gap.status())) << gap.status();
  EXPECT_NE(gap.status().message().find("do not cover"), std::string::npos) << gap.status();
  EXPECT_TRUE(absl::IsInvalidArgument(MergeRange(cur, key, {}).status()));
}

TEST(SweepResult, ParsesTheDoneEvent) {
  const db::TunedEntry e = Entry(Collective::kAllreduce, DataType::kInt32, 8, 16, kRd);
  const std::string line =
      R"({"event":"done","topology":"0123456789abcdef","entries":[)" + db::EntryToJsonText(e) + "]}";
  auto r = ParseSweepResult(line);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->fingerprint, "0123456789abcdef");
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries[0], e);
  EXPECT_FALSE(ParseSweepResult(R"({"event":"progress"})").ok());
  EXPECT_FALSE(ParseSweepResult(R"({"event":"done","entries":[]})").ok());
  auto bad = ParseSweepResult(R"({"event":"done","topology":"x","entries":[{"collective":"warp"}]})");
  EXPECT_NE(bad.status().message().find("entries[0]"), std::string::npos) << bad.status();
}

TEST(SweepResult, SingleNodeTopologies) {
  EXPECT_TRUE(IsSingleNode(
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})"));
  EXPECT_FALSE(IsSingleNode(R"({"format":2,"nodes":2,"ranks_per_node":[2,2]})"));
  // Topologies stored before format 2 say it the same way.
  EXPECT_TRUE(IsSingleNode(R"({"format":1,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2]})"));
  EXPECT_FALSE(IsSingleNode("not json"));
  EXPECT_FALSE(IsSingleNode(R"({"format":2})"));
}

class MiniSweeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mini_sweep_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const std::string one =
        R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})";
    const std::string two =
        R"({"format":2,"inter":[],"intra":[],"nodes":2,"ranks_per_node":[1,1],"release":"0.1","runtime":"hccl-tune"})";
    single_ = db::Topology{db::Sha256Hex(one).substr(0, 16), one};
    multi_ = db::Topology{db::Sha256Hex(two).substr(0, 16), two};
    ASSERT_TRUE(store_.PutTable(multi_, Table(), {}).ok());  // stale too, but two nodes: never mini-swept
    ASSERT_TRUE(store_.PutTable(single_, Table(), {}).ok());
  }
  void TearDown() override {
    sweeper_.reset();
    runner_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }

  // A stand-in hccl-tune: records its arguments, runs `body`.
  void Make(const std::string& body, int max_per_hour = 4) {
    const std::string path = dir_ + "/fake-hccl-tune";
    std::ofstream(path) << "#!/bin/sh\necho \"$@\" > \"$(dirname \"$0\")/args\"\n" << body;
    ::chmod(path.c_str(), 0755);
    SweepRunnerOptions o;
    o.command = path;
    o.daemon_target = "unix:/nonexistent.sock";
    o.stop_grace = absl::Seconds(2);
    runner_ = std::make_unique<SweepRunner>(o);
    MiniSweepOptions m;
    m.idle_s = 5;
    m.max_per_hour = max_per_hour;
    sweeper_ = std::make_unique<MiniSweeper>(
        &store_,
        [this](const db::Topology& t, const std::vector<db::TunedEntry>& e, int64_t expected) {
          db::PutOptions p;
          p.expected_version = expected;
          return store_.PutTable(t, e, p);
        },
        runner_.get(), &activity_, m, absl::Now() - absl::Hours(1));
  }
  std::string DoneLine(const std::string& fp) {
    db::TunedEntry e = Entry(Collective::kAllreduce, DataType::kInt32, 8, 16, kRd);
    e.rank_time_us = 3;
    e.sweep_id = "sw-mini";
    return "echo '{\"event\":\"done\",\"topology\":\"" + fp + "\",\"entries\":[" + db::EntryToJsonText(e) + "]}'\n";
  }
  // Ticks until an event of `kind` (or 20 s).
  MiniSweepEvent TickUntil(MiniSweepEvent::Kind kind) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      MiniSweepEvent ev = sweeper_->Tick();
      if (ev.kind == kind) return ev;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return {};
  }
  std::string Args() {
    std::ifstream in(dir_ + "/args");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string dir_;
  db::InMemoryTuningStore store_;
  db::Topology single_, multi_;
  ActivityTracker activity_;
  std::unique_ptr<SweepRunner> runner_;
  std::unique_ptr<MiniSweeper> sweeper_;
};

TEST_F(MiniSweeperTest, IdleNodeMiniSweepsTheStaleEntryAndMergesItsRange) {
  Make(DoneLine(single_.fingerprint));
  activity_.Note("job-1", single_.fingerprint, 10, absl::Now() - absl::Seconds(2));
  EXPECT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kNone);  // a job reported 2 s ago: not idle
  auto before = store_.GetTable(single_.fingerprint, 0);
  auto started = sweeper_->Tick(absl::Now() + absl::Seconds(4));  // 6 s after that report: idle (idle_s 5)
  ASSERT_EQ(started.kind, MiniSweepEvent::Kind::kStarted) << started.message;
  EXPECT_EQ(started.fingerprint, single_.fingerprint);  // not the two-node topology
  EXPECT_EQ(started.key, Table()[1].key);
  auto merged = TickUntil(MiniSweepEvent::Kind::kMerged);
  ASSERT_EQ(merged.kind, MiniSweepEvent::Kind::kMerged) << merged.message;
  const std::string args = Args();
  for (const char* want : {"--ranks 2", "--coll allreduce", "--dtype int32", "--range 8-16", "--no-table", "--force"}) {
    EXPECT_TRUE(absl::StrContains(args, want)) << want << " not in: " << args;
  }
  auto after = store_.GetTable(single_.fingerprint, 0);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->version, before->version + 1);
  EXPECT_EQ(merged.version, after->version);
  ASSERT_EQ(after->entries.size(), 4u);
  for (size_t i : {0u, 2u, 3u}) EXPECT_EQ(after->entries[i], before->entries[i]) << i;
  EXPECT_EQ(after->entries[1].configuration, kRd);
  EXPECT_FALSE(after->entries[1].stale);
  EXPECT_DOUBLE_EQ(after->entries[1].rank_time_us, 3);
  EXPECT_TRUE(store_.GetTable(multi_.fingerprint, 0)->entries[1].stale);  // untouched
  EXPECT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kNone);          // nothing stale left on one node
}

TEST_F(MiniSweeperTest, ASweepRunningByHandKeepsTheNodeBusy) {
  Make(DoneLine(single_.fingerprint));
  db::Sweep row;
  row.id = "sw-by-hand";
  row.status = db::SweepStatus::kRunning;
  row.started_unix_ms = db::NowUnixMs();
  ASSERT_TRUE(store_.PutSweep(row).ok());
  EXPECT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kNone);
  row.status = db::SweepStatus::kDone;
  row.finished_unix_ms = db::NowUnixMs();
  ASSERT_TRUE(store_.PutSweep(row).ok());
  EXPECT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kStarted);
  EXPECT_EQ(TickUntil(MiniSweepEvent::Kind::kMerged).kind, MiniSweepEvent::Kind::kMerged);
}

TEST_F(MiniSweeperTest, ATableChangedMeanwhileIsMergedIntoTheNewerVersion) {
  Make("sleep 0.3\n" + DoneLine(single_.fingerprint));
  ASSERT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kStarted);
  auto t = Table();
  t[3].configuration = kOneShot;  // an import changes another entry while the mini-sweep runs
  ASSERT_TRUE(store_.PutTable(single_, t, {}).ok());
  auto merged = TickUntil(MiniSweepEvent::Kind::kMerged);
  ASSERT_EQ(merged.kind, MiniSweepEvent::Kind::kMerged) << merged.message;
  auto after = store_.GetTable(single_.fingerprint, 0);
  EXPECT_EQ(after->entries[3].configuration, kOneShot);  // kept
  EXPECT_EQ(after->entries[1].configuration, kRd);
}

TEST_F(MiniSweeperTest, ResultForAnotherTopologyOrARemeasuredEntryIsDropped) {
  Make(DoneLine("ffffffffffffffff"));
  ASSERT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kStarted);
  auto dropped = TickUntil(MiniSweepEvent::Kind::kDropped);
  EXPECT_NE(dropped.message.find("ffffffffffffffff"), std::string::npos) << dropped.message;
  EXPECT_TRUE(store_.GetTable(single_.fingerprint, 0)->entries[1].stale);
}

TEST_F(MiniSweeperTest, AnEntryWhoseSweepFailsBacksOffAndTheNextStaleEntryGoesFirst) {
  auto t = Table();
  t[2].stale = true;  // two stale entries: [8, 16) first, then [16, inf)
  ASSERT_TRUE(store_.PutTable(single_, t, {}).ok());
  Make("echo 'hccl-tune: cannot measure' >&2\nexit 1\n", /*max_per_hour=*/20);
  const absl::Time t0 = absl::Now();
  // Ticks at `at` until an event that is not kNone (or 20 s of real time).
  auto tick_until = [this](absl::Time at) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      MiniSweepEvent ev = sweeper_->Tick(at);
      if (ev.kind != MiniSweepEvent::Kind::kNone) return ev;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return MiniSweepEvent{};
  };
  auto start_and_fail = [&](absl::Time at, const db::EntryKey& want, const std::string& backoff) {
    MiniSweepEvent started = sweeper_->Tick(at);
    ASSERT_EQ(started.kind, MiniSweepEvent::Kind::kStarted) << started.message;
    EXPECT_EQ(started.key, want);
    MiniSweepEvent failed = tick_until(at);
    ASSERT_EQ(failed.kind, MiniSweepEvent::Kind::kFailed) << failed.message;
    EXPECT_TRUE(absl::StrContains(failed.message, "cannot measure")) << failed.message;
    EXPECT_TRUE(absl::StrContains(failed.message, "not mini-swept again for " + backoff)) << failed.message;
  };
  start_and_fail(t0, t[1].key, "15m");
  start_and_fail(t0, t[2].key, "15m");  // not [8, 16) again: it backs off
  EXPECT_EQ(sweeper_->Tick(t0 + absl::Minutes(14)).kind, MiniSweepEvent::Kind::kNone);  // both back off
  start_and_fail(t0 + absl::Minutes(16), t[1].key, "30m");  // its second failure doubles the wait
  start_and_fail(t0 + absl::Minutes(16), t[2].key, "30m");
  EXPECT_EQ(sweeper_->Tick(t0 + absl::Minutes(45)).kind, MiniSweepEvent::Kind::kNone);
  // A success clears the backoff: the next failure of that entry waits 15 min again, not 1 h.
  auto script = [this](const std::string& body) {
    std::ofstream(dir_ + "/fake-hccl-tune") << "#!/bin/sh\n" << body;  // the same sweeper, another outcome
  };
  script(DoneLine(single_.fingerprint));
  ASSERT_EQ(sweeper_->Tick(t0 + absl::Minutes(47)).kind, MiniSweepEvent::Kind::kStarted);
  ASSERT_EQ(tick_until(t0 + absl::Minutes(47)).kind, MiniSweepEvent::Kind::kMerged);
  auto merged = store_.GetTable(single_.fingerprint, 0);
  ASSERT_TRUE(merged.ok());
  EXPECT_FALSE(merged->entries[1].stale);
  merged->entries[1].stale = true;  // judged stale again later
  ASSERT_TRUE(store_.PutTable(single_, merged->entries, {}).ok());
  script("echo 'hccl-tune: cannot measure' >&2\nexit 1\n");
  start_and_fail(t0 + absl::Minutes(48), merged->entries[1].key, "15m");
}

TEST_F(MiniSweeperTest, AJobThatStartsReportingCancelsTheMiniSweepWhichRetriesLater) {
  Make("trap 'exit 130' INT\nsleep 30 & wait\n", /*max_per_hour=*/2);
  ASSERT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kStarted);
  const std::string id = sweeper_->running_id();
  ASSERT_FALSE(id.empty());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kNone);  // still running, nobody reports
  activity_.Note("job-2", single_.fingerprint, 5);
  auto cancelled = sweeper_->Tick();
  ASSERT_EQ(cancelled.kind, MiniSweepEvent::Kind::kCancelled) << cancelled.message;
  EXPECT_NE(cancelled.message.find("job-2"), std::string::npos) << cancelled.message;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!sweeper_->running_id().empty() && absl::Now() < deadline) {
    sweeper_->Tick();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(sweeper_->running_id().empty());
  EXPECT_TRUE(runner_->running_id().empty());  // the child is gone
  EXPECT_TRUE(store_.GetTable(single_.fingerprint, 0)->entries[1].stale);
  // Not while the job's report is recent; once idle again it retries; the hourly budget (2) then stops it.
  EXPECT_EQ(sweeper_->Tick().kind, MiniSweepEvent::Kind::kNone);
  const absl::Time later = absl::Now() + absl::Seconds(6);
  ASSERT_EQ(sweeper_->Tick(later).kind, MiniSweepEvent::Kind::kStarted);
  ASSERT_TRUE(runner_->Cancel("").ok());
  while (!sweeper_->running_id().empty() && absl::Now() < deadline + absl::Seconds(10)) {
    sweeper_->Tick(later);
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(sweeper_->Tick(later + absl::Seconds(1)).kind, MiniSweepEvent::Kind::kNone);  // 2 this hour
  EXPECT_EQ(sweeper_->Tick(later + absl::Minutes(61)).kind, MiniSweepEvent::Kind::kStarted);
}

}  // namespace
}  // namespace hccltune::daemon

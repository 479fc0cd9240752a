// The sweep's statistics, search and winner ranges on a measurement hook with known, deterministic costs.
#include "tuner/sweep/search.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "db/memory_store.h"
#include "db/store_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tuner/sweep/sweep.h"
#include "tuner/sweep/winners.h"

namespace hccltune::sweep {
namespace {

// Known costs: candidate k at size b costs (latency_k + b / bandwidth_k) microseconds, times a deterministic
// noise factor in [1 - noise, 1 + noise] from a hash of (config, bytes, iteration).
class KnownCosts final : public Measurer {
 public:
  struct Cost {
    double latency_us, bytes_per_us;
  };
  KnownCosts(std::map<std::string, Cost> costs, double noise) : costs_(std::move(costs)), noise_(noise) {}

  absl::StatusOr<Batch> Measure(const Point& p, const std::string& config, int iters, int warmup) override {
    EXPECT_GE(warmup, 1);
    auto it = costs_.find(config);
    if (it == costs_.end()) return absl::NotFoundError(config);
    Batch b;
    int& next = counter_[config + "@" + std::to_string(p.bytes)];
    for (int i = 0; i < iters; ++i, ++next) {
      const double base = it->second.latency_us + static_cast<double>(p.bytes) / it->second.bytes_per_us;
      uint64_t h = std::hash<std::string>{}(config) ^ (p.bytes * 0x9e3779b97f4a7c15ull) ^
                   (static_cast<uint64_t>(next) * 0xbf58476d1ce4e5b9ull);
      h ^= h >> 31;
      h *= 0x94d049bb133111ebull;
      h ^= h >> 29;
      const double u = static_cast<double>(h % 10001) / 10000.0;  // [0, 1]
      b.time_us.push_back(base * (1 + noise_ * (2 * u - 1)));
      b.rank_time_us.push_back(b.time_us.back() * 0.9);
    }
    iterations += iters;
    return b;
  }
  int iterations = 0;

 private:
  std::map<std::string, Cost> costs_;
  double noise_;
  std::map<std::string, int> counter_;
};

// 24 candidates: a latency-bound family, a bandwidth family, and many clearly worse ones; two near-ties.
std::map<std::string, KnownCosts::Cost> Costs() {
  std::map<std::string, KnownCosts::Cost> c;
  c["one_shot"] = {5, 500};
  c["recursive_doubling"] = {8, 1500};
  c["ring(chunk=1M)"] = {40, 6000};
  c["ring(chunk=4M)"] = {40.5, 5950};  // within 1% of ring(chunk=1M) at every size: a near-tie
  for (int k = 0; k < 20; ++k) c["slow" + std::to_string(k)] = {60.0 + 10 * k, 1000.0 - 40 * k};
  return c;
}

std::vector<Point> Points() {
  std::vector<Point> p;
  for (uint64_t b = 1024; b <= (16u << 20); b *= 2) p.push_back(Point{Collective::kAllreduce, DataType::kFloat32, b});
  return p;
}

std::vector<PointResult> RunSearch(bool exhaustive, SearchStats* stats, int* iterations) {
  KnownCosts m(Costs(), 0.10);
  SearchOptions o;
  o.exhaustive = exhaustive;
  o.cap_us = 1e12;  // no time cap: the CI decides
  Search s(o, &m);
  std::vector<std::string> configs;
  for (const auto& [name, cost] : Costs()) configs.push_back(name);
  const auto points = Points();
  std::vector<std::vector<std::string>> cands(points.size(), configs);
  std::vector<std::string> defaults(points.size(), "slow3");
  auto r = s.Run(points, cands, defaults);
  EXPECT_TRUE(r.ok()) << r.status();
  *stats = s.stats();
  *iterations = m.iterations;
  return r.ok() ? *r : std::vector<PointResult>{};
}

TEST(MedianCI, OrderStatistics) {
  MedianCI one = MedianWithCI({7});
  EXPECT_EQ(one.median, 7);
  EXPECT_EQ(one.lo, 7);
  EXPECT_EQ(one.hi, 7);
  std::vector<double> x;
  for (int i = 1; i <= 100; ++i) x.push_back(i);
  MedianCI m = MedianWithCI(x);
  EXPECT_DOUBLE_EQ(m.median, 50.5);
  // n = 100: ranks 50 ± 9.8 -> the 41st and 60th smallest.
  EXPECT_EQ(m.lo, 41);
  EXPECT_EQ(m.hi, 60);
  EXPECT_LT(m.lo, m.median);
  EXPECT_GT(m.hi, m.median);
  std::vector<double> flat(20, 3.0);
  EXPECT_EQ(MedianWithCI(flat).rel_half_width(), 0);
}

TEST(Search, PrunedPicksTheSameWinnersAsExhaustiveAndMeasuresLess) {
  SearchStats ex_stats, pr_stats;
  int ex_iters = 0, pr_iters = 0;
  const auto ex = RunSearch(true, &ex_stats, &ex_iters);
  const auto pr = RunSearch(false, &pr_stats, &pr_iters);
  ASSERT_EQ(ex.size(), Points().size());
  ASSERT_EQ(pr.size(), ex.size());
  std::map<std::string, int> winners;
  for (size_t i = 0; i < ex.size(); ++i) {
    const std::string& we = ex[i].candidates[static_cast<size_t>(ex[i].winner)].config;
    const std::string& wp = pr[i].candidates[static_cast<size_t>(pr[i].winner)].config;
    EXPECT_EQ(we, wp) << "at " << ex[i].point.bytes << " bytes";
    ++winners[we];
    // Every exhaustive candidate finished on its own terms.
    for (const auto& c : ex[i].candidates) EXPECT_NE(c.state, CandidateState::kPruned);
  }
  // The cost model has crossovers: latency-bound winners at small sizes, ring at large ones.
  EXPECT_GE(winners.size(), 2u);
  EXPECT_EQ(ex.front().candidates[static_cast<size_t>(ex.front().winner)].config, "one_shot");
  EXPECT_EQ(ex.back().candidates[static_cast<size_t>(ex.back().winner)].config.substr(0, 4), "ring");
  EXPECT_EQ(ex_stats.pruned, 0u);
  EXPECT_GE(pr_stats.pruned, 15u * Points().size());
  // Pruning measurably saves: at most a third of the exhaustive iterations here.
  std::printf("iterations: pruned %d, exhaustive %d\n", pr_iters, ex_iters);
  EXPECT_LT(pr_iters * 3, ex_iters) << "pruned " << pr_iters << " vs exhaustive " << ex_iters;
  EXPECT_EQ(static_cast<uint64_t>(pr_iters), pr_stats.iterations);
  EXPECT_GT(pr_stats.saved_iterations, 0);
  // The default is never pruned.
  for (const auto& r : pr) {
    EXPECT_NE(r.candidates[static_cast<size_t>(r.default_index)].state, CandidateState::kPruned);
  }
}

TEST(Search, CapAndStop) {
  KnownCosts m(Costs(), 0.5);  // too noisy to converge quickly
  SearchOptions o;
  o.exhaustive = true;
  o.cap_us = 2000;
  o.max_iters = 1000;
  Search s(o, &m);
  auto r = s.Run({Point{Collective::kAllreduce, DataType::kFloat32, 1024}}, {{"one_shot", "slow0"}}, {"one_shot"});
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& c : r->front().candidates) {
    EXPECT_TRUE(c.state == CandidateState::kCapped || c.state == CandidateState::kConverged);
    if (c.state == CandidateState::kCapped) {
      EXPECT_GE(c.measured_us, 2000);
    }
  }
  Search stopped(o, &m);
  int calls = 0;
  stopped.should_stop = [&] { return ++calls > 3; };
  auto s2 =
      stopped.Run({Point{Collective::kAllreduce, DataType::kFloat32, 1024}}, {{"one_shot", "slow0"}}, {"one_shot"});
  EXPECT_TRUE(absl::IsCancelled(s2.status())) << s2.status();
}

// A machine whose times grow 4% with every batch it runs: candidates measured to the end collect ever slower
// samples, so their medians end above the first batch of a candidate pruned early.
class Drifting final : public Measurer {
 public:
  explicit Drifting(std::map<std::string, double> base_us) : base_us_(std::move(base_us)) {}
  absl::StatusOr<Batch> Measure(const Point&, const std::string& config, int iters, int) override {
    const double t = base_us_.at(config) * std::pow(1.04, calls_++);
    Batch b;
    b.time_us.assign(static_cast<size_t>(iters), t);
    b.rank_time_us = b.time_us;
    return b;
  }

 private:
  std::map<std::string, double> base_us_;
  int calls_ = 0;
};

TEST(Search, APrunedCandidateNeverWinsOnItsEarlyMedian) {
  Drifting m({{"fast", 100}, {"dflt", 110}, {"early", 125}});
  SearchOptions o;
  o.max_iters = 30;
  o.cap_us = 1e12;
  Search s(o, &m);
  auto r = s.Run({Point{Collective::kAllreduce, DataType::kFloat32, 4096}}, {{"fast", "dflt", "early"}}, {"dflt"});
  ASSERT_TRUE(r.ok()) << r.status();
  const PointResult& p = (*r)[0];
  const CandidateResult& early = p.candidates[2];
  ASSERT_EQ(early.state, CandidateState::kPruned);
  // The premise: its early median is below the finishers' final ones.
  ASSERT_LT(early.stat.median, p.candidates[0].stat.median);
  EXPECT_EQ(p.candidates[static_cast<size_t>(p.winner)].config, "fast");
  EXPECT_EQ(p.candidates[static_cast<size_t>(p.runner_up)].config, "dflt");
}

TEST(Winners, RangesCoverTheRequestedSizesAndMergeEqualWinners) {
  SearchStats st;
  int it = 0;
  const auto results = RunSearch(false, &st, &it);
  EntryContext ctx{4, 1000, 16u << 20, "sw-test", "0.1", 1};
  const auto entries = BuildEntries(results, ctx);
  ASSERT_FALSE(entries.empty());
  EXPECT_LT(entries.size(), results.size());  // adjacent equal winners merged
  EXPECT_EQ(entries.front().key.range.min, 1000u);
  EXPECT_GT(entries.back().key.range.max, 16u << 20);
  for (size_t i = 1; i < entries.size(); ++i) {
    EXPECT_EQ(entries[i - 1].key.range.max, entries[i].key.range.min);  // no gap, no overlap
    EXPECT_NE(entries[i - 1].configuration, entries[i].configuration);
  }
  for (const auto& e : entries) {
    EXPECT_EQ(e.key.world_size, 4);
    EXPECT_FALSE(e.runner_up.empty());
    EXPECT_GE(e.margin, 0);
    EXPECT_GT(e.default_margin, 0.1);  // slow3 is far from every winner
    EXPECT_GT(e.busbw_gbps, 0);
    EXPECT_EQ(e.sweep_id, "sw-test");
    // KnownCosts gives every iteration a per-rank time of 0.9 x its max-over-ranks time.
    EXPECT_NEAR(e.rank_time_us, 0.9 * e.time_us, 1e-9 * e.time_us) << e.configuration;
  }
}

TEST(Winners, AnExactRangeIsCoveredExactly) {
  SearchStats st;
  int it = 0;
  const auto results = RunSearch(false, &st, &it);
  EntryContext ctx{4, 1024, 16u << 20, "sw-test", "0.1", 1};
  ctx.exact_range = ByteRange{1000, 20u << 20};  // neither end a power of two
  const auto entries = BuildEntries(results, ctx);
  ASSERT_FALSE(entries.empty());
  EXPECT_EQ(entries.front().key.range.min, 1000u);
  EXPECT_EQ(entries.back().key.range.max, 20u << 20);
  for (size_t i = 1; i < entries.size(); ++i) EXPECT_EQ(entries[i - 1].key.range.max, entries[i].key.range.min);
  ctx.exact_range = ByteRange{1024, kUnbounded};
  EXPECT_EQ(BuildEntries(results, ctx).back().key.range.max, kUnbounded);
}

TEST(Winners, ExactRangeMustMatchTheMeasuredSizes) {
  SweepSpec s;
  s.min_bytes = 4096;
  s.max_bytes = (64 << 10) - 1;
  s.exact_range = ByteRange{4096, 64 << 10};
  EXPECT_TRUE(s.Validate().ok()) << s.Validate();
  auto back = SweepSpec::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->exact_range.has_value());
  EXPECT_EQ(*back->exact_range, *s.exact_range);
  s.max_bytes = 64 << 10;  // HI itself is not in the range
  EXPECT_TRUE(absl::IsInvalidArgument(s.Validate()));
  s.min_bytes = 3 << 10;
  s.max_bytes = (4 << 10) - 1;
  s.exact_range = ByteRange{3 << 10, 4 << 10};
  EXPECT_NE(s.Validate().message().find("no power of two"), std::string::npos) << s.Validate();
}

db::TunedEntry MergeTestEntry(Collective c, uint64_t lo, uint64_t hi, const char* cfg, double time_us = 1) {
  db::TunedEntry e;
  e.key.collective = c;
  e.key.world_size = 2;
  e.key.range = ByteRange{lo, hi};
  e.configuration = cfg;
  e.time_us = time_us;
  e.samples = 7;
  e.sweep_id = "old-sweep";
  return e;
}

// (configuration, min, max) of each entry, in the order MergeEntries returns them.
std::vector<std::tuple<std::string, uint64_t, uint64_t>> Ranges(const std::vector<db::TunedEntry>& entries) {
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> out;
  for (const auto& e : entries) out.emplace_back(e.configuration, e.key.range.min, e.key.range.max);
  return out;
}

TEST(Winners, MergeKeepsTheOldPartsOutsideTheFreshRanges) {
  using R = std::vector<std::tuple<std::string, uint64_t, uint64_t>>;
  const auto ar = Collective::kAllreduce;
  // The reviewer's case: 0-64K = a, 64K- = b, a fresh sweep of 1M only: b keeps 64K-1M and 2M-.
  const std::vector<db::TunedEntry> table = {MergeTestEntry(ar, 0, 64 << 10, "a"),
                                             MergeTestEntry(ar, 64 << 10, kUnbounded, "b", 5)};
  auto merged = MergeEntries(table, {MergeTestEntry(ar, 1 << 20, 2 << 20, "n")});
  EXPECT_EQ(Ranges(merged),
            (R{{"a", 0, 64 << 10}, {"b", 64 << 10, 1 << 20}, {"b", 2 << 20, kUnbounded}, {"n", 1 << 20, 2 << 20}}));
  // The kept parts keep every other field of the entry they came from.
  EXPECT_DOUBLE_EQ(merged[2].time_us, 5);
  EXPECT_EQ(merged[2].samples, 7u);
  EXPECT_EQ(merged[2].sweep_id, "old-sweep");

  // A fresh range overlapping an old one's lower end, and one overlapping an old one's upper end.
  merged = MergeEntries(table, {MergeTestEntry(ar, 32 << 10, 128 << 10, "n")});
  EXPECT_EQ(Ranges(merged), (R{{"a", 0, 32 << 10}, {"b", 128 << 10, kUnbounded}, {"n", 32 << 10, 128 << 10}}));

  // Two fresh ranges inside one old entry: three old parts around them; a fresh range covering an old entry
  // whole leaves nothing of it.
  merged = MergeEntries(table, {MergeTestEntry(ar, 0, 64 << 10, "x"), MergeTestEntry(ar, 1 << 20, 2 << 20, "y"),
                                MergeTestEntry(ar, 8 << 20, 16 << 20, "z")});
  EXPECT_EQ(Ranges(merged), (R{{"b", 64 << 10, 1 << 20},
                               {"b", 2 << 20, 8 << 20},
                               {"b", 16 << 20, kUnbounded},
                               {"x", 0, 64 << 10},
                               {"y", 1 << 20, 2 << 20},
                               {"z", 8 << 20, 16 << 20}}));

  // Only the same (collective, dtype, world size) is trimmed: the allgather entry stays whole.
  auto other_world = MergeTestEntry(ar, 0, kUnbounded, "w");
  other_world.key.world_size = 4;
  merged = MergeEntries({MergeTestEntry(Collective::kAllgather, 0, kUnbounded, "c"), other_world},
                        {MergeTestEntry(ar, 1 << 20, 2 << 20, "n")});
  EXPECT_EQ(Ranges(merged), (R{{"c", 0, kUnbounded}, {"w", 0, kUnbounded}, {"n", 1 << 20, 2 << 20}}));

  // The merged table is one the store accepts (no overlaps), without gaps from 0 to the open end.
  auto normalized = db::NormalizeEntries(
      MergeEntries({MergeTestEntry(ar, 0, 64 << 10, "one_shot"), MergeTestEntry(ar, 64 << 10, kUnbounded, "ring")},
                   {MergeTestEntry(ar, 1 << 20, 2 << 20, "recursive_doubling")}));
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  ASSERT_EQ(normalized->size(), 4u);
  EXPECT_EQ(normalized->front().key.range.min, 0u);
  for (size_t i = 1; i < normalized->size(); ++i) {
    EXPECT_EQ((*normalized)[i - 1].key.range.max, (*normalized)[i].key.range.min);
  }
  EXPECT_EQ(normalized->back().key.range.max, kUnbounded);
}

// A store whose table changes under the first write (hccl-tuned's online policy publishing between a sweep's
// read and its put): `race` is put, without a compare-and-swap, right before the first PutTable is forwarded.
class RacingStore final : public db::TuningStore {
 public:
  RacingStore(db::TuningStore& inner, std::vector<db::TunedEntry> race) : inner_(inner), race_(std::move(race)) {}
  absl::StatusOr<int64_t> PutTable(const db::Topology& t, absl::Span<const db::TunedEntry> e,
                                   const db::PutOptions& o) override {
    ++puts;
    if (!race_.empty()) {
      auto v = inner_.PutTable(t, race_, {});
      if (!v.ok()) return v.status();
      race_.clear();
    }
    return inner_.PutTable(t, e, o);
  }
  absl::StatusOr<db::Table> GetTable(absl::string_view f, int64_t v) override { return inner_.GetTable(f, v); }
  absl::StatusOr<std::optional<db::TunedEntry>> Lookup(absl::string_view f, Collective c, DataType d, int w, uint64_t b,
                                                       int64_t v) override {
    return inner_.Lookup(f, c, d, w, b, v);
  }
  absl::StatusOr<std::vector<db::TableSummary>> ListTables() override { return inner_.ListTables(); }
  absl::StatusOr<std::vector<db::TableSummary>> ListTablesOfClass(absl::string_view c) override {
    return inner_.ListTablesOfClass(c);
  }
  absl::StatusOr<uint64_t> DeleteTable(absl::string_view f) override { return inner_.DeleteTable(f); }
  absl::StatusOr<int64_t> Rollback(absl::string_view f, int64_t v) override { return inner_.Rollback(f, v); }
  absl::Status RecordLiveSamples(absl::string_view f, absl::Span<const db::LiveSample> s) override {
    return inner_.RecordLiveSamples(f, s);
  }
  absl::StatusOr<std::vector<db::LiveStats>> GetLiveStats(absl::string_view f) override {
    return inner_.GetLiveStats(f);
  }
  absl::Status PutSweep(const db::Sweep& s) override { return inner_.PutSweep(s); }
  absl::StatusOr<db::Sweep> GetSweep(absl::string_view id) override { return inner_.GetSweep(id); }
  absl::StatusOr<std::vector<db::Sweep>> ListSweeps() override { return inner_.ListSweeps(); }
  absl::Status AddSweepSamples(absl::string_view id, absl::Span<const db::SweepSample> s) override {
    return inner_.AddSweepSamples(id, s);
  }
  absl::StatusOr<std::vector<db::SweepSample>> GetSweepSamples(absl::string_view id) override {
    return inner_.GetSweepSamples(id);
  }
  absl::Status PutLinks(const db::StoredLinks& l) override { return inner_.PutLinks(l); }
  absl::StatusOr<db::StoredLinks> GetLinks(absl::string_view f) override { return inner_.GetLinks(f); }
  absl::StatusOr<int64_t> PutModel(const db::StoredModel& m) override { return inner_.PutModel(m); }
  absl::StatusOr<db::StoredModel> GetModel(absl::string_view c, int64_t v) override { return inner_.GetModel(c, v); }
  absl::StatusOr<std::vector<db::StoredModel>> ListModels() override { return inner_.ListModels(); }
  absl::StatusOr<db::StoreInfo> Info() override { return inner_.Info(); }
  int puts = 0;

 private:
  db::TuningStore& inner_;
  std::vector<db::TunedEntry> race_;
};

TEST(Winners, PutMergedMergesIntoAVersionPublishedMeanwhile) {
  using R = std::vector<std::tuple<std::string, uint64_t, uint64_t>>;
  const auto ar = Collective::kAllreduce;
  db::Topology topo;
  topo.json =
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[2],"release":"0.1","runtime":"hccl-tune"})";
  topo.fingerprint = db::Sha256Hex(topo.json).substr(0, 16);
  db::InMemoryTuningStore inner;
  auto v1 = inner.PutTable(topo, {MergeTestEntry(ar, 0, kUnbounded, "ring")}, {});
  ASSERT_TRUE(v1.ok()) << v1.status();  // version 1
  // Published between the sweep's read (version 1) and its put: an allgather entry the sweep knows nothing of.
  // The store keeps configurations in their canonical form.
  const std::string kRing = "ring(chunk=512K,channels=1,link=auto)", kOneShot = "one_shot(channels=1,link=auto)",
                    kDirect = "direct(channels=1,link=auto)";
  RacingStore racing(inner, {MergeTestEntry(ar, 0, kUnbounded, "ring"),
                             MergeTestEntry(Collective::kAllgather, 0, kUnbounded, "direct")});
  auto v = PutMerged(racing, topo, {MergeTestEntry(ar, 1 << 20, 2 << 20, "one_shot")});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 3);           // version 2 was the race's; the merge went on top of it
  EXPECT_EQ(racing.puts, 2);  // the first put lost the compare-and-swap and wrote nothing
  auto t = inner.GetTable(topo.fingerprint, 0);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(
      Ranges(t->entries),
      (R{{kRing, 0, 1 << 20}, {kOneShot, 1 << 20, 2 << 20}, {kRing, 2 << 20, kUnbounded}, {kDirect, 0, kUnbounded}}))
      << "the version published meanwhile must not be overwritten";
  // Without a table yet: the first put creates it (expected version -1).
  db::Topology other = topo;
  other.json =
      R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[4],"release":"0.1","runtime":"hccl-tune"})";
  other.fingerprint = db::Sha256Hex(other.json).substr(0, 16);
  auto first = PutMerged(inner, other, {MergeTestEntry(ar, 0, kUnbounded, "one_shot")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, 1);
}

// --resume is refused while the sweep's owner still runs it, naming the owner's pid; a row whose owner is gone,
// or that is not marked running, may be resumed.
TEST(Resume, RefusedWhileTheOwnerStillRuns) {
  using json = nlohmann::json;
  db::Sweep row;
  row.id = "sw-live";
  row.status = db::SweepStatus::kRunning;
  row.started_unix_ms = db::NowUnixMs();
  json params = {{"spec", json::object()}, {"owner", json::parse(db::ThisProcessOwnerJson())}};
  row.params_json = params.dump();
  absl::Status s = CheckResumable(row, db::NowUnixMs());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(absl::StrCat("pid ", ::getpid())), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("sw-live"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("--force"), absl::string_view::npos) << s;
  // A resumed sweep keeps its first start time: a live owner here is refused even 7 h after it.
  EXPECT_EQ(CheckResumable(row, db::NowUnixMs() + int64_t{7} * 3600 * 1000).code(),
            absl::StatusCode::kFailedPrecondition);
  // The owner exited (a reaped child's pid): resumable.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  params["owner"]["pid"] = static_cast<long>(child);
  row.params_json = params.dump();
  EXPECT_TRUE(CheckResumable(row, db::NowUnixMs()).ok()) << CheckResumable(row, db::NowUnixMs());
  // Stopped or failed sweeps are resumable whoever owned them.
  params["owner"]["pid"] = static_cast<long>(::getpid());
  row.params_json = params.dump();
  for (db::SweepStatus st : {db::SweepStatus::kCancelled, db::SweepStatus::kFailed}) {
    row.status = st;
    EXPECT_TRUE(CheckResumable(row, db::NowUnixMs()).ok());
  }
  // No owner recorded (an older row, another host): running counts for 6 h after its start.
  row.status = db::SweepStatus::kRunning;
  row.params_json = R"({"spec":{}})";
  EXPECT_EQ(CheckResumable(row, db::NowUnixMs()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(CheckResumable(row, db::NowUnixMs() + int64_t{7} * 3600 * 1000).ok());
}

}  // namespace
}  // namespace hccltune::sweep

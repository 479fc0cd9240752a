// `hccl-tune export --format hccl-env` (tuner/export/hccl_env.h): the HCCL_ALGO value it writes parses with our own
// HCCL_ALGO parser, and the selector then runs, at every measured size, the algorithm the export names; the
// choice is the least total time over the sizes, evenly weighted or weighted by the reported calls.
#include "tuner/export/hccl_env.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "db/memory_store.h"
#include "policies/rules.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/selector/selector.h"

namespace hccltune::exporter {
namespace {

constexpr int kWorld = 4;
const std::vector<Collective> kColls = {Collective::kAllreduce, Collective::kAllgather};

// What a sweep measures per collective (allgather has no halving_doubling: only ring is HCCL-nameable there).
std::vector<std::string> Configs(Collective c) {
  if (c == Collective::kAllgather) return {"ring(chunk=64K)", "ring(chunk=1M)", "bruck"};
  return {"ring(chunk=64K)", "ring(chunk=1M)", "halving_doubling", "one_shot"};
}

std::vector<uint64_t> Sizes() {
  std::vector<uint64_t> s;
  for (uint64_t b = 1024; b <= (4u << 20); b *= 4) s.push_back(b);
  return s;
}

struct Fixture {
  db::InMemoryTuningStore store;
  db::Topology topo;
  // Generated medians: time[coll][bytes][config].
  std::map<Collective, std::map<uint64_t, std::map<std::string, double>>> time;
};

// A table measured by one sweep whose samples are kept: random times per configuration and size, so which
// algorithm wins overall differs by seed and by weighting.
void Fill(Fixture* f, unsigned seed) {
  TopologyDescription d;
  d.ranks_per_node = {kWorld};
  d.intra = {"shm"};
  d.release = "0.1";
  const TopologyKeys k = KeysOf(d);
  f->topo = db::Topology{k.fingerprint, k.json, ""};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(10, 1000);
  std::vector<db::TunedEntry> entries;
  std::vector<db::SweepSample> samples;
  for (Collective c : kColls) {
    const auto sizes = Sizes();
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::string best;
      for (const std::string& cfg : Configs(c)) {
        const double t = u(rng) * static_cast<double>(i + 1);
        f->time[c][sizes[i]][cfg] = t;
        if (best.empty() || t < f->time[c][sizes[i]][best]) best = cfg;
        for (int it = 0; it < 5; ++it) {  // odd count: the median is the middle sample, t
          samples.push_back({c, DataType::kFloat32, kWorld, sizes[i], cfg, t + (it - 2) * 0.001, t, it});
        }
      }
      db::TunedEntry e;
      e.key = {
          c, DataType::kFloat32, kWorld, {i == 0 ? 0 : sizes[i], i + 1 < sizes.size() ? sizes[i + 1] : kUnbounded}};
      e.configuration = best;
      e.time_us = f->time[c][sizes[i]][best];
      e.sweep_id = "sw-test";
      entries.push_back(e);
    }
  }
  ASSERT_TRUE(f->store.PutSweep(db::Sweep{"sw-test", "{}", db::SweepStatus::kDone, 1, 1, 2, ""}).ok());
  ASSERT_TRUE(f->store.AddSweepSamples("sw-test", samples).ok());
  ASSERT_TRUE(f->store.PutTable(f->topo, entries, {}).ok());
}

// The algorithm HCCL_ALGO can name (ring, halving_doubling) with the least weighted total of its best
// configuration per size.
std::string Expected(const Fixture& f, Collective c, const std::map<uint64_t, double>& weight) {
  std::map<std::string, double> total;
  for (const auto& [bytes, by_cfg] : f.time.at(c)) {
    std::map<std::string, double> best;
    for (const auto& [cfg, t] : by_cfg) {
      const std::string alg = Configuration::Parse(cfg)->algorithm;
      if (alg != "ring" && alg != "halving_doubling") continue;
      if (!best.count(alg) || t < best[alg]) best[alg] = t;
    }
    for (const auto& [alg, t] : best) total[alg] += (weight.empty() ? 1.0 : weight.at(bytes)) * t;
  }
  if (!total.count("halving_doubling")) return "ring";
  return total["ring"] <= total["halving_doubling"] ? "ring" : "halving_doubling";
}

// The value of the `export HCCL_ALGO='...'` line of the printed text.
std::string ExportedValue(const std::string& text) {
  const std::string head = "export HCCL_ALGO='";
  const size_t at = text.find(head);
  if (at == std::string::npos) return "";
  const size_t end = text.find('\'', at + head.size());
  return text.substr(at + head.size(), end - at - head.size());
}

// Round trip: the printed line parses with our HCCL_ALGO parser, and the selector built from it runs the named
// algorithm at every measured size with source HCCL_ALGO.
void ExpectSelects(const HcclEnvExport& out, const Fixture& f) {
  const std::string value = ExportedValue(out.text);
  ASSERT_EQ(value, out.hccl_algo);
  auto parsed = policies::ParseHcclAlgo(value);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  Environment env;
  env.hccl_algo = value;
  GroupTopology one;
  one.node_of.assign(kWorld, 0);
  auto sel = Selector::Create(env, kWorld, one);
  ASSERT_TRUE(sel.ok()) << sel.status();
  ASSERT_EQ(out.choices.size(), kColls.size());
  for (const HcclEnvChoice& ch : out.choices) {
    const policies::HcclLevels* lv = parsed->For(ch.collective);
    ASSERT_NE(lv, nullptr);
    ASSERT_TRUE(lv->level0.has_value());
    EXPECT_EQ(*lv->level0, ch.algorithm);
    for (const auto& [bytes, unused] : f.time.at(ch.collective)) {
      auto c = sel->Choose(ch.collective, DataType::kFloat32, bytes);
      EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo) << CollectiveName(ch.collective) << " " << bytes;
      EXPECT_EQ(c.config->algorithm, ch.algorithm) << CollectiveName(ch.collective) << " " << bytes;
    }
  }
}

TEST(HcclEnvExport, EvenWeightsPickLeastTotalAndRoundTrip) {
  for (unsigned seed = 1; seed <= 6; ++seed) {
    Fixture f;
    Fill(&f, seed);
    auto out = ExportHcclEnv(f.store, "", 0);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->world_size, kWorld);
    for (const HcclEnvChoice& ch : out->choices) {
      EXPECT_EQ(ch.algorithm, Expected(f, ch.collective, {})) << "seed " << seed;
      EXPECT_EQ(ch.live_calls, 0u);
      EXPECT_EQ(ch.sizes, static_cast<int>(Sizes().size()));
    }
    EXPECT_NE(out->text.find("weighted evenly"), std::string::npos) << out->text;
    EXPECT_NE(out->text.find("no byte ranges"), std::string::npos) << out->text;
    ExpectSelects(*out, f);
  }
}

TEST(HcclEnvExport, ReportedCallsWeighTheSizes) {
  int flipped = 0;
  for (unsigned seed = 1; seed <= 12; ++seed) {
    Fixture f;
    Fill(&f, seed);
    // Calls reported at one size only: the choice is that size's faster algorithm.
    const uint64_t hot = Sizes()[1];
    std::vector<db::LiveSample> live;
    for (Collective c : kColls) {
      for (int i = 0; i < 50; ++i) live.push_back({c, DataType::kFloat32, kWorld, hot + 100, "ring", 5.0, 1});
    }
    ASSERT_TRUE(f.store.RecordLiveSamples(f.topo.fingerprint, live).ok());
    auto out = ExportHcclEnv(f.store, f.topo.fingerprint, kWorld);
    ASSERT_TRUE(out.ok()) << out.status();
    for (const HcclEnvChoice& ch : out->choices) {
      std::map<uint64_t, double> w;
      for (uint64_t b : Sizes()) w[b] = b == hot ? 50 : 0;
      EXPECT_EQ(ch.live_calls, 50u);
      EXPECT_EQ(ch.algorithm, Expected(f, ch.collective, w)) << "seed " << seed;
      flipped += ch.algorithm != Expected(f, ch.collective, {});
    }
    EXPECT_NE(out->text.find("weighted by 50 reported calls"), std::string::npos) << out->text;
    ExpectSelects(*out, f);
  }
  EXPECT_GT(flipped, 0) << "the weights never changed a choice: the test data does not exercise them";
}

// Several nodes: HCCL_ALGO's level1:X runs hierarchical(inter=X) with form=auto (parallel on even nodes, leader
// on uneven ones). A table whose fastest allgather is a form auto does not run there: the export totals that form
// apart, prints it, and names only what level1:X runs; the selector built from the line runs exactly that.
struct NodesCase {
  std::vector<int> ranks_per_node;
  HierForm auto_runs;  // what form=auto runs on these nodes
  HierForm other;      // the form HCCL_ALGO cannot name there
  const char* other_name;
};

void FillNodes(Fixture* f, const NodesCase& k) {
  TopologyDescription d;
  d.ranks_per_node = k.ranks_per_node;
  d.intra = {"shm"};
  d.release = "0.1";
  const TopologyKeys keys = KeysOf(d);
  f->topo = db::Topology{keys.fingerprint, keys.json, ""};
  int world = 0;
  for (int n : k.ranks_per_node) world += n;
  const std::string other = absl::StrCat("hierarchical(inter=ring,form=", k.other_name, ")");
  const std::string same = absl::StrCat("hierarchical(inter=ring,form=", HierFormName(k.auto_runs), ")");
  std::vector<db::TunedEntry> entries;
  std::vector<db::SweepSample> samples;
  const auto sizes = Sizes();
  for (size_t i = 0; i < sizes.size(); ++i) {
    // The other form is fastest everywhere; form=auto and its explicit twin take turns being second.
    const double scale = static_cast<double>(i + 1);
    const std::map<std::string, double> t = {{other, 10 * scale},
                                             {"hierarchical(inter=ring)", (i % 2 ? 30 : 20) * scale},
                                             {same, (i % 2 ? 20 : 30) * scale},
                                             {"ring(chunk=1M)", 25 * scale},
                                             {"direct", 40 * scale}};
    for (const auto& [cfg, time] : t) {
      ASSERT_TRUE(Configuration::Parse(cfg).ok()) << cfg;
      f->time[Collective::kAllgather][sizes[i]][cfg] = time;
      for (int it = 0; it < 3; ++it) {
        samples.push_back({Collective::kAllgather, DataType::kFloat32, world, sizes[i], cfg, time, time, it});
      }
    }
    db::TunedEntry e;
    e.key = {Collective::kAllgather,
             DataType::kFloat32,
             world,
             {i == 0 ? 0 : sizes[i], i + 1 < sizes.size() ? sizes[i + 1] : kUnbounded}};
    e.configuration = other;
    e.time_us = t.at(other);
    e.sweep_id = "sw-nodes";
    entries.push_back(e);
  }
  ASSERT_TRUE(f->store.PutSweep(db::Sweep{"sw-nodes", "{}", db::SweepStatus::kDone, 1, 1, 2, ""}).ok());
  ASSERT_TRUE(f->store.AddSweepSamples("sw-nodes", samples).ok());
  ASSERT_TRUE(f->store.PutTable(f->topo, entries, {}).ok());
}

TEST(HcclEnvExport, SeveralNodesNameOnlyTheFormLevel1Runs) {
  const std::vector<NodesCase> cases = {{{2, 2}, HierForm::kParallel, HierForm::kLeader, "leader"},
                                        {{2, 2, 2, 2}, HierForm::kParallel, HierForm::kLeader, "leader"},
                                        {{3, 2}, HierForm::kLeader, HierForm::kParallel, "parallel"}};
  for (const NodesCase& k : cases) {
    Fixture f;
    FillNodes(&f, k);
    const std::string shape = absl::StrJoin(k.ranks_per_node, "+");
    auto out = ExportHcclEnv(f.store, "", 0);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->choices.size(), 1u);
    const HcclEnvChoice& ch = out->choices.front();
    EXPECT_EQ(ch.algorithm, "hierarchical(inter=ring)") << shape << "\n" << out->text;
    EXPECT_EQ(out->hccl_algo, "allgather=level0:NA;level1:ring") << shape;
    // level1:ring's total: per size the better of form=auto and its explicit twin, 20 x (1 + ... + sizes); the
    // other form's total (10 x the same) beside it, never chosen.
    const double n = static_cast<double>(Sizes().size());
    const double sum = n * (n + 1) / 2;
    std::map<std::string, AlgorithmTotal> totals;
    for (const AlgorithmTotal& t : ch.totals) totals[t.algorithm] = t;
    const std::string other = absl::StrCat("hierarchical(inter=ring,form=", k.other_name, ")");
    ASSERT_TRUE(totals.count(other)) << shape << "\n" << out->text;
    EXPECT_FALSE(totals[other].nameable);
    EXPECT_DOUBLE_EQ(totals[other].total_us, 10 * sum);
    EXPECT_TRUE(totals["hierarchical(inter=ring)"].nameable);
    EXPECT_DOUBLE_EQ(totals["hierarchical(inter=ring)"].total_us, 20 * sum);
    EXPECT_DOUBLE_EQ(ch.winners_us, 10 * sum);
    EXPECT_NE(out->text.find(
                  absl::StrFormat("%s %.3f ms (HCCL_ALGO cannot name the form: not chosen)", other, 10 * sum / 1e3)),
              std::string::npos)
        << out->text;
    EXPECT_NE(out->text.find(absl::StrCat("form=auto, the ", HierFormName(k.auto_runs), " form")), std::string::npos)
        << out->text;
    // Round trip: the line parses, and the selector on these nodes runs hierarchical(inter=ring) with form=auto,
    // the form the export priced, at every measured size.
    const std::string value = ExportedValue(out->text);
    ASSERT_EQ(value, out->hccl_algo);
    ASSERT_TRUE(policies::ParseHcclAlgo(value).ok());
    Environment env;
    env.hccl_algo = value;
    GroupTopology topo;
    for (size_t node = 0; node < k.ranks_per_node.size(); ++node) {
      for (int r = 0; r < k.ranks_per_node[node]; ++r) topo.node_of.push_back(static_cast<int>(node));
    }
    topo.num_nodes = static_cast<int>(k.ranks_per_node.size());
    auto sel = Selector::Create(env, static_cast<int>(topo.node_of.size()), topo);
    ASSERT_TRUE(sel.ok()) << sel.status();
    for (uint64_t bytes : Sizes()) {
      auto c = sel->Choose(Collective::kAllgather, DataType::kFloat32, bytes);
      EXPECT_EQ(c.source, ChoiceSource::kHcclAlgo) << shape << " " << bytes;
      EXPECT_EQ(c.config->algorithm, "hierarchical") << shape << " " << bytes;
      ASSERT_NE(c.config->inter, nullptr) << shape << " " << bytes;
      EXPECT_EQ(c.config->inter->algorithm, "ring") << shape << " " << bytes;
      EXPECT_EQ(c.config->form, HierForm::kAuto) << shape << " " << bytes;
    }
  }
}

TEST(HcclEnvExport, ErrorsNameWhatIsMissing) {
  db::InMemoryTuningStore empty;
  auto none = ExportHcclEnv(empty, "", 0);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no tuned table of hccl-tune"), std::string::npos) << none.status();
  Fixture f;
  Fill(&f, 3);
  auto world = ExportHcclEnv(f.store, "", 8);
  ASSERT_FALSE(world.ok());
  EXPECT_NE(world.status().message().find("no entries at world 8"), std::string::npos) << world.status();
}

}  // namespace
}  // namespace hccltune::exporter

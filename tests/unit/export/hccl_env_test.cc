// `hccl-tune export --format hccl-env` (tuner/export/hccl_env.h): the HCCL_ALGO value it writes parses with our own
// HCCL_ALGO parser, and the selector then runs, at every measured size, the algorithm the export names; the
// choice is the least total time over the sizes, evenly weighted or weighted by the reported calls.
#include "tuner/export/hccl_env.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

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

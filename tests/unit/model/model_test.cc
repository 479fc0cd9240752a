// The cost model: formulas, profiles, and predictions computed by hand from predict.h's rules.
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "model/check.h"
#include "model/fit.h"
#include "model/formula.h"
#include "model/predict.h"
#include "model/profile.h"
#include "model/simulate.h"

namespace hccltune::model {
namespace {

double Eval(const std::string& text, const FormulaVars& v) {
  auto f = Formula::Parse(text);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? f->Eval(v) : NAN;
}

TEST(Formula, EvaluatesTheRegistryGrammar) {
  const FormulaVars v{6, 1024, 3, 2, 256};
  EXPECT_DOUBLE_EQ(Eval("2*(p-1)*n/p", v), 2 * 5 * 1024 / 6.0);
  EXPECT_DOUBLE_EQ(Eval("floor(log2(p))+2*fold(p)", v), 2 + 2);
  EXPECT_DOUBLE_EQ(Eval("ceil(log2(p))", v), 3);
  EXPECT_DOUBLE_EQ(Eval("pow2(p)", v), 4);
  EXPECT_DOUBLE_EQ(Eval("fold(8)+fold(6)", v), 1);
  EXPECT_DOUBLE_EQ(Eval("max(0,p-2+ceil(n/c))", v), 8);
  EXPECT_DOUBLE_EQ(Eval("-min(1,p-1)", v), -1);
  EXPECT_DOUBLE_EQ(Eval("l*m-p", v), 0);
  EXPECT_DOUBLE_EQ(Eval("2*(l-1)+2*(m-1)", FormulaVars{8, 0, 8, 1, 1}), 14);
}

TEST(Formula, AnErrorNamesTheTextAndWhatItCouldNotRead) {
  const auto expect_error = [](const std::string& text, const std::string& what) {
    auto f = Formula::Parse(text);
    ASSERT_FALSE(f.ok()) << text;
    EXPECT_TRUE(absl::StrContains(f.status().message(), "formula '" + text + "'")) << f.status();
    EXPECT_TRUE(absl::StrContains(f.status().message(), what)) << f.status();
  };
  expect_error("2*q", "unknown name 'q' at 2");
  expect_error("log2(p", "expected ')'");
  expect_error("p)", "unexpected ')'");
  expect_error("sqrt(p)", "unknown function sqrt of 1 arguments");
  expect_error("min(p)", "unknown function min of 1 arguments");
  expect_error("", "ends early");
}

const char kProfile[] = R"({"name": "t",
  "intra": {"latency_us": 1, "message_us": 0.5, "bandwidth_GBps": 10},
  "inter": {"latency_us": 10, "message_us": 2, "bandwidth_GBps": 1},
  "nics_per_node": 2, "reduce_GBps": 5, "cores_per_node": 4})";

ClusterProfile TestProfile() {
  auto p = ParseProfile(kProfile, "test");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : ClusterProfile{};
}

TEST(Profile, ReadsEveryKeyInSecondsAndSecondsPerByte) {
  const ClusterProfile p = TestProfile();
  EXPECT_EQ(p.name, "t");
  EXPECT_DOUBLE_EQ(p.intra.alpha_s, 1e-6);
  EXPECT_DOUBLE_EQ(p.intra.overhead_s, 0.5e-6);
  EXPECT_DOUBLE_EQ(p.intra.beta_s, 1e-10);
  EXPECT_DOUBLE_EQ(p.inter.alpha_s, 10e-6);
  EXPECT_DOUBLE_EQ(p.inter.beta_s, 1e-9);
  EXPECT_EQ(p.nics_per_node, 2);
  EXPECT_DOUBLE_EQ(p.gamma_s, 0.2e-9);
  EXPECT_EQ(p.cores_per_node, 4);
}

TEST(Profile, BadInputIsNamed) {
  const auto expect_error = [](const std::string& text, const std::string& what) {
    auto p = ParseProfile(text, "x.json");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_TRUE(absl::StrContains(p.status().message(), "profile x.json: " + what)) << p.status();
  };
  const std::string link = R"({"latency_us": 1, "message_us": 0, "bandwidth_GBps": 1})";
  expect_error("[1]", "not a JSON object");
  expect_error("{", "not a JSON object");
  expect_error(R"({"inter": )" + link + R"(, "reduce_GBps": 1})", "intra must be an object");
  expect_error(R"({"intra": )" + link + R"(, "inter": {"latency_us": 1, "message_us": 0, "bandwidth_GBps": -1},
                 "reduce_GBps": 1})",
               "inter.bandwidth_GBps must be a number > 0 (got -1)");
  expect_error(R"({"intra": )" + link + R"(, "inter": {"latency_us": 1, "bandwidth_GBps": 1}, "reduce_GBps": 1})",
               "inter.message_us is missing");
  expect_error(R"({"intra": )" + link + R"(, "inter": )" + link + R"(, "reduce_GBps": 1, "nic": 2})",
               "unknown key 'nic'");
  expect_error(R"({"intra": )" + link + R"(, "inter": )" + link + R"(, "reduce_GBps": 1, "nics_per_node": 0})",
               "nics_per_node must be an integer >= 1 (got 0)");
  auto missing = ReadProfileFile("/nonexistent/profile.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "/nonexistent/profile.json")) << missing.status();
}

double Predict(Collective c, const std::string& alg, int nodes, int l, uint64_t bytes) {
  auto t = PredictSeconds(TestProfile(), c, alg, 512 * 1024, Shape{nodes, l}, bytes);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : NAN;
}

TEST(Predict, OneNodeIsRoundsOverheadBytesAndReduction) {
  // allreduce ring, 4 ranks, 1 MB: 6 steps, 6 messages, 2*3/4 MB bytes, half of them reduced.
  const double n = 1e6, bytes = 1.5 * n;
  const double want = 6 * 1e-6 + 6 * 0.5e-6 + bytes * 1e-10 + 0.2e-9 * bytes * 0.5;
  EXPECT_NEAR(Predict(Collective::kAllreduce, "ring", 1, 4, 1000000), want, 1e-12);
  // allgather direct sends p-1 messages in its one round.
  EXPECT_NEAR(Predict(Collective::kAllgather, "direct", 1, 4, 4000), 1e-6 + 3 * 0.5e-6 + 3000 * 1e-10, 1e-12);
}

TEST(Predict, ARingCrossesTheNetworkOncePerNode) {
  // allgather ring on 2 nodes x 2 ranks: 3 rounds and messages at the network's latency and overhead, the bytes at
  // the network's rate (one rank per node on a NIC).
  EXPECT_NEAR(Predict(Collective::kAllgather, "ring", 2, 2, 4000), 3 * 10e-6 + 3 * 2e-6 + 3000 * 1e-9, 1e-12);
}

TEST(Predict, EveryRankSharesItsNodesNics) {
  // allgather direct on 2 nodes x 4 ranks, 8 MB: each rank sends 7 MB, 4/7 of it off the node; 4 ranks share 2 NICs.
  const double b = 7e6, f = 4.0 / 7;
  const double want = 10e-6 + 7 * 2e-6 + std::max(4 * f * b * 1e-9 / 2, b * 1e-10);
  EXPECT_NEAR(Predict(Collective::kAllgather, "direct", 2, 4, 8000000), want, 1e-12);
}

TEST(Predict, LevelsAddTheStepInsideANodeAndTheStepBetweenNodes) {
  // allgather hierarchical, 3 nodes x 4 ranks, 12 MB: inside (l=4, m=1) 3 rounds, 3*12/4 MB; between (l=1, m=3)
  // 2 rounds, 2*12/3 MB through 2 NICs. 4 ranks on 4 cores: no oversubscription.
  const double n = 12e6;
  const double inside = 3 * 1e-6 + 3 * 0.5e-6 + 3 * n / 4 * 1e-10;
  const double between = 2 * 10e-6 + 2 * 2e-6 + 2 * n / 3 * 1e-9 / 2;
  EXPECT_NEAR(Predict(Collective::kAllgather, "hierarchical", 3, 4, 12000000), inside + between, 1e-12);
}

TEST(Predict, MoreBusyRanksThanCoresStretchEverything) {
  const double four = Predict(Collective::kBroadcast, "binomial_tree", 1, 4, 1000);
  const ClusterProfile p = TestProfile();
  // 8 ranks on 4 cores: twice the 8-rank time computed without the factor.
  const double rounds = 3, bytes = 3 * 1000;
  EXPECT_NEAR(Predict(Collective::kBroadcast, "binomial_tree", 1, 8, 1000),
              2 * (rounds * p.intra.alpha_s + rounds * p.intra.overhead_s + bytes * p.intra.beta_s), 1e-12);
  EXPECT_GT(four, 0);
}

TEST(Predict, AnUnknownAlgorithmIsNotFound) {
  auto t = PredictSeconds(TestProfile(), Collective::kAllreduce, "warp", 1, Shape{1, 2}, 8);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "allreduce warp")) << t.status();
}

TEST(RankCandidates, OnlyValidAlgorithmsFastestFirst) {
  const auto one = RankCandidates(TestProfile(), Collective::kAllreduce, Shape{1, 4}, 1 << 20);
  ASSERT_GE(one.size(), 5u);
  for (size_t i = 1; i < one.size(); ++i) EXPECT_LE(one[i - 1].seconds, one[i].seconds);
  bool hierarchical = false;
  for (const auto& c : one) {
    EXPECT_FALSE(absl::StartsWith(c.config, "symmetric")) << "symmetric is never a candidate by name";
    hierarchical = hierarchical || absl::StartsWith(c.config, "hierarchical");
  }
  EXPECT_FALSE(hierarchical) << "hierarchical is not valid on one node";
  const auto two = RankCandidates(TestProfile(), Collective::kAllreduce, Shape{2, 4}, 1 << 20);
  bool found = false;
  for (const auto& c : two) found = found || absl::StartsWith(c.config, "hierarchical");
  EXPECT_TRUE(found);
}

TEST(Simulate, SmallCallsGoToFewRoundsAndLargeOnesToFewBytes) {
  // 64 nodes x 8 ranks: one message to every rank (one_shot) loses to log-round algorithms at 8 B because of
  // its 511 messages; at 64 MiB the winner sends at most 2n per rank (no log2(p)*n algorithm).
  const auto preds = Simulate(TestProfile(), Shape{64, 8}, {Collective::kAllreduce}, 8, 64 << 20);
  ASSERT_EQ(preds.size(), 1u);
  ASSERT_EQ(preds[0].sizes.size(), 24u);
  const std::string small = AlgorithmOf(preds[0].sizes.front().ranked.front().config);
  EXPECT_NE(small, "one_shot");
  const std::string large = AlgorithmOf(preds[0].sizes.back().ranked.front().config);
  EXPECT_TRUE(large == "hierarchical" || large == "ring" || large == "halving_doubling" || large == "double_ring")
      << large;
  const auto ranges = Crossovers(preds[0]);
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.front().from, 8u);
  EXPECT_EQ(ranges.back().to, uint64_t{64} << 20);
  for (size_t i = 1; i < ranges.size(); ++i) {
    EXPECT_EQ(ranges[i].from, ranges[i - 1].to * 2);
    EXPECT_NE(ranges[i].algorithm, ranges[i - 1].algorithm);
  }
}

}  // namespace
}  // namespace hccltune::model

namespace hccltune::model {
namespace {

// Measurements the model itself predicts for `truth` on every valid candidate of a few collectives, shapes, sizes.
std::vector<Measurement> Synthetic(const ClusterProfile& truth, const std::vector<Shape>& shapes) {
  std::vector<Measurement> out;
  for (const Shape& shape : shapes) {
    for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kBroadcast}) {
      for (uint64_t b = 8; b <= (uint64_t{16} << 20); b *= 8) {
        for (const Candidate& cand : RankCandidates(truth, c, shape, b)) {
          out.push_back({c, cand.config, shape, b, cand.seconds});
        }
      }
    }
  }
  return out;
}

TEST(Fit, RecoversTheProfileThatMadeTheMeasurements) {
  ClusterProfile truth = TestProfile();
  const auto ms = Synthetic(truth, {{1, 2}, {1, 3}, {1, 4}, {2, 2}, {3, 2}});
  auto fit = Fit(ms, {"t", truth.nics_per_node, truth.cores_per_node});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(fit->intra_points, 50u);
  EXPECT_GT(fit->inter_points, 50u);
  const ClusterProfile& p = fit->profile;
  ASSERT_TRUE(p.inter_known);
  EXPECT_NEAR(p.intra.alpha_s, truth.intra.alpha_s, 1e-3 * truth.intra.alpha_s);
  EXPECT_NEAR(p.intra.overhead_s, truth.intra.overhead_s, 1e-3 * truth.intra.overhead_s);
  EXPECT_NEAR(p.intra.beta_s, truth.intra.beta_s, 1e-3 * truth.intra.beta_s);
  EXPECT_NEAR(p.gamma_s, truth.gamma_s, 1e-3 * truth.gamma_s);
  // The network: measurements where the node's link was the bottleneck are fitted as if the NIC were, so only close.
  EXPECT_NEAR(p.inter.alpha_s, truth.inter.alpha_s, 0.1 * truth.inter.alpha_s);
  EXPECT_NEAR(p.inter.beta_s, truth.inter.beta_s, 0.1 * truth.inter.beta_s);
  const CheckReport r = Check(p, ms);
  ASSERT_FALSE(r.buckets.empty());
  for (const auto& [c, s] : r.summary) {
    EXPECT_LT(s.median_error, 0.05) << CollectiveName(c);
    EXPECT_EQ(s.winner_ok, s.buckets) << CollectiveName(c);
  }
}

TEST(Fit, OneNodeOnlyLeavesTheNetworkUnknownAndNothingIsPredictedAcrossNodes) {
  const auto ms = Synthetic(TestProfile(), {{1, 2}, {1, 4}});
  auto fit = Fit(ms, {"one", 1, 4});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_FALSE(fit->profile.inter_known);
  auto t = PredictSeconds(fit->profile, Collective::kAllreduce, "ring", 1, Shape{2, 2}, 8);
  ASSERT_FALSE(t.ok());
  EXPECT_TRUE(absl::StrContains(t.status().message(), "never measured the network")) << t.status();
  auto back = ParseProfile(ProfileToJson(fit->profile), "round trip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(back->inter_known);
  EXPECT_NEAR(back->intra.beta_s, fit->profile.intra.beta_s, 1e-6 * fit->profile.intra.beta_s);
}

TEST(Fit, NoOneNodeMeasurementIsAnError) {
  std::vector<Measurement> across = {{Collective::kAllreduce, "ring", Shape{2, 2}, 1024, 1e-5}};
  auto fit = Fit(across, {});
  ASSERT_FALSE(fit.ok());
  EXPECT_TRUE(absl::StrContains(fit.status().message(), "no one-node measurement")) << fit.status();
}

TEST(Check, AWrongWinnerIsCountedWithItsGap) {
  // Two candidates measured the other way round from the model's ranking: the predicted winner is 50% slower.
  const ClusterProfile p = TestProfile();
  const double ring = *PredictSeconds(p, Collective::kAllgather, "ring", 512 * 1024, Shape{1, 4}, 1 << 20);
  const double direct = *PredictSeconds(p, Collective::kAllgather, "direct", 512 * 1024, Shape{1, 4}, 1 << 20);
  const bool direct_first = direct < ring;
  const std::string winner = direct_first ? "direct" : "ring(chunk=512K)";
  const std::string other = direct_first ? "ring(chunk=512K)" : "direct";
  const std::vector<Measurement> ms = {{Collective::kAllgather, winner, Shape{1, 4}, 1 << 20, 3e-3},
                                       {Collective::kAllgather, other, Shape{1, 4}, 1 << 20, 2e-3}};
  const CheckReport r = Check(p, ms);
  ASSERT_EQ(r.buckets.size(), 1u);
  EXPECT_NEAR(r.buckets[0].winner_gap, 0.5, 1e-9);
  EXPECT_FALSE(r.buckets[0].winner_ok());
  EXPECT_EQ(r.summary.at(Collective::kAllgather).winner_ok, 0u);
}

}  // namespace
}  // namespace hccltune::model

// The cost model: formulas, profiles, and predictions computed by hand from predict.h's rules.
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "model/check.h"
#include "model/fit.h"
#include "model/formula.h"
#include "model/predict.h"
#include "model/profile.h"
#include "model/simulate.h"
#include "model/table_choice.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/config.h"
#include "runtime/common/configuration.h"
#include "runtime/common/mailbox_block.h"
#include "runtime/selector/selector.h"
#include "tests/unit/model/test_profiles.h"

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

TEST(Predict, AChainAcrossNodesPaysItsPipelineFill) {
  // broadcast chain on 4 nodes x 1 rank, 4 MB in chunks of c: 2 + 4 MB/c rounds; the last rank's first chunk waits
  // behind 2 others, so 4 MB + 2c bytes cross the network: a smaller chunk pays more rounds and less fill.
  const ClusterProfile p = TestProfile();
  const auto chain = [](uint64_t chunk, int nodes, int l) {
    auto t = PredictSeconds(TestProfile(), Collective::kBroadcast, "chain", chunk, Shape{nodes, l}, 4000000);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : NAN;
  };
  const double rounds = 2 + 4000000.0 / 1000000;
  EXPECT_NEAR(chain(1000000, 4, 1), rounds * (p.inter.alpha_s + p.inter.overhead_s) + (4e6 + 2 * 1e6) * p.inter.beta_s,
              1e-12);
  EXPECT_LT(chain(1000000, 4, 1), chain(4000000, 4, 1));
  // Inside a node the hops do not overlap (measured: the chunk does not change the time), so there is no fill.
  EXPECT_NEAR(chain(1000000, 1, 4), rounds * (p.intra.alpha_s + p.intra.overhead_s) + 4e6 * p.intra.beta_s, 1e-12);
}

TEST(Predict, EveryRankSharesItsNodesNics) {
  // allgather direct on 2 nodes x 4 ranks, 8 MB: each rank sends 7 MB, 4/7 of it off the node; 4 ranks share 2 NICs.
  const double b = 7e6, f = 4.0 / 7;
  const double want = 10e-6 + 7 * 2e-6 + std::max(4 * f * b * 1e-9 / 2, b * 1e-10);
  EXPECT_NEAR(Predict(Collective::kAllgather, "direct", 2, 4, 8000000), want, 1e-12);
}

// Partners at doubling distances: on 4 nodes x 2 ranks (numbered node by node) the round at distance 1 stays inside
// a node and the rounds at distances 2 and 4 cross, every rank of a node at once; a binomial tree's crossing rounds
// have one rank of a node left in the tree.
TEST(Predict, ADoublingAlgorithmCrossesNodesOnlyInItsFarRounds) {
  const uint64_t n = 1 << 20;
  auto rd = CostTerms(Collective::kAllreduce, "recursive_doubling", 0, Shape{4, 2}, n, {});
  ASSERT_TRUE(rd.ok()) << rd.status();
  EXPECT_DOUBLE_EQ(rd->s_intra, 1);
  EXPECT_DOUBLE_EQ(rd->b_intra, n);
  EXPECT_DOUBLE_EQ(rd->s_inter, 2);
  EXPECT_DOUBLE_EQ(rd->b_inter, 2 * 2.0 * n);  // 2 ranks x 2 rounds of n through the node's NIC
  EXPECT_DOUBLE_EQ(rd->b_alt, 2.0 * n);
  // Halving doubling sends its large halves between nodes: 2(m-1)/m of n across, 2(l-1)/(l m) inside.
  auto hd = CostTerms(Collective::kAllreduce, "halving_doubling", 0, Shape{4, 2}, n, {});
  ASSERT_TRUE(hd.ok()) << hd.status();
  EXPECT_DOUBLE_EQ(hd->s_inter, 4);
  EXPECT_DOUBLE_EQ(hd->s_intra, 2);
  EXPECT_DOUBLE_EQ(hd->b_alt, 1.5 * n);
  EXPECT_DOUBLE_EQ(hd->b_intra, 0.25 * n);
  auto tree = CostTerms(Collective::kBroadcast, "binomial_tree", 0, Shape{4, 2}, n, {});
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_DOUBLE_EQ(tree->s_inter, 2);
  EXPECT_DOUBLE_EQ(tree->s_intra, 1);
  EXPECT_DOUBLE_EQ(tree->b_inter, 2.0 * n);  // one rank per node: 2 rounds of n
  // On one node, or one rank per node, the whole call is on one side.
  auto one = CostTerms(Collective::kAllreduce, "recursive_doubling", 0, Shape{1, 8}, n, {});
  EXPECT_DOUBLE_EQ(one->s_intra, 3);
  EXPECT_DOUBLE_EQ(one->s_inter, 0);
  auto flat = CostTerms(Collective::kAllreduce, "recursive_doubling", 0, Shape{8, 1}, n, {});
  EXPECT_DOUBLE_EQ(flat->s_inter, 3);
  EXPECT_DOUBLE_EQ(flat->s_intra, 0);
  EXPECT_DOUBLE_EQ(flat->b_intra, 0);
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

TEST(Fit, RecoversTheProfileThatMadeTheMeasurements) {
  // Version 2 with every term: 3 and 4 ranks on 2 cores wait for a core, small direct/one_shot calls are mailbox
  // exchanges, and the link=tcp copies of the one-node measurements fit the tcp link.
  ClusterProfile truth = TestProfile();
  truth.version = kProfileVersion;
  truth.cores_per_node = 2;
  truth.call_s = 0.2e-6;
  truth.mailbox_s = 0.7e-6;
  truth.oversubscribed = {3e-6, 0.8e-6, 0.05e-9};
  truth.intra_tcp = {4e-6, 1e-6, 1e-9};
  truth.intra_tcp_known = true;
  auto ms = Synthetic(truth, {{1, 2}, {1, 3}, {1, 4}, {2, 2}, {3, 2}});
  const size_t measured = ms.size();
  for (size_t i = 0; i < measured; ++i) {
    auto config = Configuration::Parse(ms[i].configuration);
    ASSERT_TRUE(config.ok()) << config.status();
    if (ms[i].shape.nodes > 1 || absl::StartsWith(ms[i].configuration, "hierarchical")) continue;
    config->link.kind = LinkKind::kTcp;
    Measurement m = ms[i];
    m.configuration = config->ToString();
    ASSERT_TRUE(absl::StrContains(m.configuration, "link=tcp")) << m.configuration;
    auto t = PredictSeconds(truth, m.collective, config->algorithm, config->chunk, m.shape, m.bytes, LinkKind::kTcp);
    ASSERT_TRUE(t.ok()) << t.status();
    m.seconds = *t;
    ms.push_back(m);
  }
  auto fit = Fit(ms, {"t", truth.nics_per_node, truth.cores_per_node});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(fit->intra_points, 50u);
  EXPECT_GT(fit->tcp_points, 50u);
  EXPECT_GT(fit->inter_points, 50u);
  const ClusterProfile& p = fit->profile;
  EXPECT_EQ(p.version, kProfileVersion);
  ASSERT_TRUE(p.inter_known);
  ASSERT_TRUE(p.intra_tcp_known);
  EXPECT_NEAR(p.intra.alpha_s, truth.intra.alpha_s, 1e-3 * truth.intra.alpha_s);
  EXPECT_NEAR(p.intra.overhead_s, truth.intra.overhead_s, 1e-3 * truth.intra.overhead_s);
  EXPECT_NEAR(p.intra.beta_s, truth.intra.beta_s, 1e-3 * truth.intra.beta_s);
  EXPECT_NEAR(p.gamma_s, truth.gamma_s, 1e-3 * truth.gamma_s);
  EXPECT_NEAR(p.call_s, truth.call_s, 1e-3 * truth.call_s);
  EXPECT_NEAR(p.mailbox_s, truth.mailbox_s, 1e-3 * truth.mailbox_s);
  EXPECT_NEAR(p.oversubscribed.call_s, truth.oversubscribed.call_s, 1e-3 * truth.oversubscribed.call_s);
  EXPECT_NEAR(p.oversubscribed.round_s, truth.oversubscribed.round_s, 1e-3 * truth.oversubscribed.round_s);
  EXPECT_NEAR(p.oversubscribed.byte_s, truth.oversubscribed.byte_s, 1e-3 * truth.oversubscribed.byte_s);
  EXPECT_NEAR(p.intra_tcp.alpha_s, truth.intra_tcp.alpha_s, 1e-3 * truth.intra_tcp.alpha_s);
  EXPECT_NEAR(p.intra_tcp.beta_s, truth.intra_tcp.beta_s, 1e-3 * truth.intra_tcp.beta_s);
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
  // Every candidate with its measured and predicted time, the fastest measured first.
  ASSERT_EQ(r.buckets[0].points.size(), 2u);
  EXPECT_EQ(r.buckets[0].points[0].config, other);
  EXPECT_DOUBLE_EQ(r.buckets[0].points[0].measured_s, 2e-3);
  EXPECT_DOUBLE_EQ(r.buckets[0].points[0].predicted_s, direct_first ? ring : direct);
  EXPECT_EQ(r.buckets[0].points[1].config, winner);
  EXPECT_DOUBLE_EQ(r.buckets[0].points[1].predicted_s, direct_first ? direct : ring);
}

// A predicted table keeps the built-in default unless another candidate is predicted clearly faster: the default
// of allreduce on 4 x 2 at 1 MiB, priced by the model, against a candidate just within and one well beyond the margin.
TEST(TableChoice, TheDefaultStaysUnlessAnotherIsPredictedClearlyFaster) {
  const ClusterProfile p = TestProfile();
  const Shape shape{4, 2};
  const uint64_t n = 1 << 20;
  const Configuration builtin = BuiltinDefault(Collective::kAllreduce, shape, n);
  const GroupTopology topo = NodeMajorTopology(shape);
  ASSERT_EQ(topo.num_nodes, 4);
  ASSERT_EQ(topo.node_of, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3}));
  auto selector = Selector::Create(Environment{}, 8, topo);
  ASSERT_TRUE(selector.ok()) << selector.status();
  EXPECT_EQ(builtin.ToString(), selector->Choose(Collective::kAllreduce, DataType::kFloat32, n).config->ToString());
  const double at = *PredictSeconds(p, Collective::kAllreduce, builtin, shape, n);
  const std::string other = builtin.algorithm == "ring" ? "recursive_doubling(channels=1,link=auto)"
                                                        : "ring(chunk=512K,channels=1,link=auto)";

  const TableChoice close =
      ChooseForTable(p, Collective::kAllreduce, shape, n, {{other, at / (1 + kKeepDefaultMargin) * 1.01}});
  EXPECT_TRUE(close.kept_default);
  EXPECT_EQ(close.chosen.config, builtin.ToString());
  EXPECT_DOUBLE_EQ(close.chosen.seconds, at);
  EXPECT_EQ(close.fastest.config, other);

  const TableChoice clear =
      ChooseForTable(p, Collective::kAllreduce, shape, n, {{other, at / (1 + kKeepDefaultMargin) * 0.99}});
  EXPECT_FALSE(clear.kept_default);
  EXPECT_EQ(clear.chosen.config, other);
  EXPECT_EQ(clear.builtin.config, builtin.ToString());
  EXPECT_DOUBLE_EQ(clear.builtin.seconds, at);

  // The default ranked first is simply the choice.
  const TableChoice first = ChooseForTable(p, Collective::kAllreduce, shape, n, {{builtin.ToString(), at}});
  EXPECT_FALSE(first.kept_default);
  EXPECT_EQ(first.chosen.config, builtin.ToString());
}

}  // namespace
}  // namespace hccltune::model

namespace hccltune::model {
namespace {

double PredictV2(Collective c, const std::string& alg, int l, uint64_t bytes, LinkKind link = LinkKind::kAuto) {
  auto t = PredictSeconds(TestProfileV2(), c, alg, 512 * 1024, Shape{1, l}, bytes, link);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : NAN;
}

TEST(Registry, AMailboxBlockIsWrittenExactlyForTheAlgorithmsWithAMailboxForm) {
  for (Collective c : AllCollectives()) {
    for (const std::string& name : registry::AlgorithmsFor(c)) {
      const registry::AlgorithmCost* cost = registry::Cost(c, name);
      ASSERT_NE(cost, nullptr);
      EXPECT_EQ(registry::FindExchange(c, name) != nullptr, !cost->mailbox.empty()) << CollectiveName(c) << " " << name;
      if (!cost->mailbox.empty()) {
        EXPECT_TRUE(Formula::Parse(cost->mailbox).ok()) << cost->mailbox;
      }
    }
  }
}

TEST(Profile, VersionTwoReadsItsTermsAndWritesThemBack) {
  const ClusterProfile p = TestProfileV2();
  EXPECT_EQ(p.version, 2);
  EXPECT_DOUBLE_EQ(p.mailbox_s, 0.25e-6);
  EXPECT_DOUBLE_EQ(p.oversubscribed.call_s, 3e-6);
  EXPECT_DOUBLE_EQ(p.oversubscribed.round_s, 0.75e-6);
  EXPECT_DOUBLE_EQ(p.oversubscribed.byte_s, 0.5e-9);
  ASSERT_TRUE(p.intra_tcp_known);
  EXPECT_DOUBLE_EQ(p.intra_tcp.alpha_s, 8e-6);
  auto back = ParseProfile(ProfileToJson(p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->version, 2);
  EXPECT_NEAR(back->mailbox_s, p.mailbox_s, 1e-15);
  EXPECT_NEAR(back->oversubscribed.byte_s, p.oversubscribed.byte_s, 1e-18);
  EXPECT_TRUE(back->intra_tcp_known);
  // A version 1 profile is written as before: no version or version 2 key, so older readers still read it.
  const std::string v1 = ProfileToJson(TestProfile());
  for (const char* key : {"version", "mailbox_us", "oversubscribed", "intra_tcp"}) {
    EXPECT_FALSE(absl::StrContains(v1, key)) << v1;
  }
}

TEST(Profile, VersionTwoKeysNeedVersionTwoAndANewerVersionIsRefused) {
  const std::string base = R"("intra": {"latency_us": 1, "message_us": 0, "bandwidth_GBps": 1}, "reduce_GBps": 1)";
  auto v1 = ParseProfile("{" + base + R"(, "mailbox_us": 1})", "x.json");
  ASSERT_FALSE(v1.ok());
  EXPECT_TRUE(absl::StrContains(v1.status().message(), "mailbox_us needs \"version\": 2")) << v1.status();
  auto v3 = ParseProfile("{" + base + R"(, "version": 3})", "x.json");
  ASSERT_FALSE(v3.ok());
  EXPECT_TRUE(absl::StrContains(v3.status().message(), "version 3 is newer")) << v3.status();
  auto bad = ParseProfile("{" + base + R"(, "version": 2, "oversubscribed": {"call_us": 1, "round_us": 1}})", "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "oversubscribed.byte_ns is missing")) << bad.status();
}

double PredictConfigV2(Collective c, const std::string& config, const Shape& shape, uint64_t bytes) {
  auto parsed = Configuration::Parse(config);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok()) return NAN;
  auto t = PredictSeconds(TestProfileV2(), c, *parsed, shape, bytes);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : NAN;
}

TEST(Levels, AHierarchicalConfigurationIsTheSumOfItsStepsAsConfigured) {
  const ClusterProfile p = TestProfileV2();
  const Shape shape{3, 4};  // 4 ranks on 4 cores per node: no wait for a core
  // allgather, form=parallel: allgather ring of n/4 among 3 nodes, 4 of them at once on 2 NICs (2 rounds, 2n/12 each:
  // 4 x 2e6 bytes through 2 NICs), then allgather ring of n inside each node (3 rounds, 3n/4 bytes).
  const double inside = 3 * p.intra.alpha_s + 3 * p.intra.overhead_s + 9e6 * p.intra.beta_s;
  const double between = 2 * p.inter.alpha_s + 2 * p.inter.overhead_s + 4e6 * p.inter.beta_s;
  const double ring =
      PredictConfigV2(Collective::kAllgather, "hierarchical(intra=ring,inter=ring,form=parallel)", shape, 12000000);
  EXPECT_NEAR(ring, inside + between, 1e-12);
  // The inter step as configured: direct takes one round where the ring takes two, for the same bytes.
  const double direct =
      PredictConfigV2(Collective::kAllgather, "hierarchical(intra=ring,inter=direct,form=parallel)", shape, 12000000);
  EXPECT_NEAR(ring - direct, p.inter.alpha_s, 1e-12);
  // form=leader takes its own steps: one leader per node carries all n between nodes (2n/3 through 2 NICs).
  const double leader =
      PredictConfigV2(Collective::kAllgather, "hierarchical(intra=ring,inter=ring,form=leader)", shape, 12000000);
  EXPECT_GT(leader, ring);
  // A version 1 profile keeps the registry's formula with m = 1 and l = 1 (ring-shaped steps whatever is configured).
  auto v1 = Configuration::Parse("hierarchical(intra=ring,inter=direct,form=parallel)");
  ASSERT_TRUE(v1.ok());
  auto t1 = PredictSeconds(TestProfile(), Collective::kAllgather, *v1, shape, 12000000);
  auto t0 = PredictSeconds(TestProfile(), Collective::kAllgather, "hierarchical", 1, shape, 12000000);
  ASSERT_TRUE(t1.ok() && t0.ok());
  EXPECT_DOUBLE_EQ(*t1, *t0);
}

TEST(Levels, EachStepOfAHierarchicalCallWaitsToStartWhenOversubscribed) {
  ClusterProfile p = TestProfileV2();
  p.inter_oversubscribed = {40e-6, 0, 0};  // only the wait for a call to start across nodes
  const auto predict = [&](const std::string& config, const Shape& shape) {
    auto c = Configuration::Parse(config);
    EXPECT_TRUE(c.ok()) << c.status();
    auto t = PredictSeconds(p, Collective::kAllreduce, *c, shape, 8192);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : NAN;
  };
  // 4 x 8 ranks on 4 cores: e = 1. Hierarchical allreduce takes 3 steps (reduce-scatter inside, allreduce between
  // nodes, allgather inside): a flat call starts once across nodes, each of its steps starts after the last one.
  const std::string hier = "hierarchical(intra=ring,inter=ring)";
  p.inter_oversubscribed.call_s = 0;
  const double without = predict(hier, {4, 8});
  p.inter_oversubscribed.call_s = 40e-6;
  EXPECT_NEAR(predict(hier, {4, 8}) - without, 3 * 40e-6, 1e-12);
  p.inter_oversubscribed.call_s = 0;
  const double flat_without = predict("ring", {4, 8});
  p.inter_oversubscribed.call_s = 40e-6;
  EXPECT_NEAR(predict("ring", {4, 8}) - flat_without, 40e-6, 1e-12);
  // With a core per rank nothing waits.
  const double dedicated = predict(hier, {4, 2});
  p.inter_oversubscribed.call_s = 0;
  EXPECT_DOUBLE_EQ(predict(hier, {4, 2}), dedicated);
}

TEST(Levels, CandidatesListEveryInterStepFormAndChainChunk) {
  std::set<std::string> names;
  for (const Candidate& c : RankCandidates(TestProfileV2(), Collective::kAllgather, Shape{3, 4}, 1 << 20)) {
    names.insert(PricedName(c.config));
  }
  for (const char* want : {"hierarchical(inter=ring,form=parallel)", "hierarchical(inter=direct,form=leader)",
                           "hierarchical(inter=recursive_doubling,form=parallel)", "ring", "direct"}) {
    EXPECT_EQ(names.count(want), 1u) << want;
  }
  std::set<std::string> chains;
  for (const Candidate& c : RankCandidates(TestProfileV2(), Collective::kBroadcast, Shape{4, 1}, 1 << 20)) {
    if (AlgorithmOf(c.config) == "chain") chains.insert(PricedName(c.config));
  }
  EXPECT_EQ(chains,
            (std::set<std::string>{"chain(chunk=64K)", "chain(chunk=256K)", "chain(chunk=1M)", "chain(chunk=4M)"}));
}

TEST(Predict, ASmallCallOfAMailboxFormIsOneExchangeOnOneNode) {
  const ClusterProfile p = TestProfileV2();
  // allreduce one_shot, 4 ranks, 8 KiB: one exchange instead of 1 round and 3 messages; 3*8 KiB read, half reduced.
  const double n = 8192, b = 3 * n;
  EXPECT_NEAR(PredictV2(Collective::kAllreduce, "one_shot", 4, 8192),
              p.mailbox_s + b * p.intra.beta_s + 0.5 * b * p.gamma_s, 1e-15);
  // Past the mailbox block: the round and the messages again.
  const double big = 2.0 * kMailboxBlockBytes, bb = 3 * big;
  EXPECT_NEAR(PredictV2(Collective::kAllreduce, "one_shot", 4, 2 * kMailboxBlockBytes),
              p.intra.alpha_s + 3 * p.intra.overhead_s + bb * p.intra.beta_s + 0.5 * bb * p.gamma_s, 1e-15);
  // allgather direct posts its block n/p: 4 ranks x 16 KiB fit, 4 x 32 KiB do not.
  const uint64_t fits = 4 * kMailboxBlockBytes;
  EXPECT_NEAR(PredictV2(Collective::kAllgather, "direct", 4, fits), p.mailbox_s + 0.75 * fits * p.intra.beta_s, 1e-15);
  EXPECT_NEAR(PredictV2(Collective::kAllgather, "direct", 4, 2 * fits),
              p.intra.alpha_s + 3 * p.intra.overhead_s + 1.5 * fits * p.intra.beta_s, 1e-15);
  // Over tcp there is no mailbox: the round and messages at the tcp link.
  EXPECT_NEAR(PredictV2(Collective::kAllgather, "direct", 4, fits, LinkKind::kTcp),
              p.intra_tcp.alpha_s + 3 * p.intra_tcp.overhead_s + 0.75 * fits * p.intra_tcp.beta_s, 1e-15);
  // A version 1 profile knows no mailbox: the round and the messages at any size.
  auto v1 = PredictSeconds(TestProfile(), Collective::kAllgather, "direct", 1, Shape{1, 4}, fits);
  ASSERT_TRUE(v1.ok());
  EXPECT_NEAR(*v1, 1e-6 + 3 * 0.5e-6 + 0.75 * fits * 1e-10, 1e-15);
}

TEST(Predict, VersionTwoAddsTheWaitForACoreOnlyWhenOversubscribed) {
  const ClusterProfile p = TestProfileV2();
  const auto plain = [&](double rounds, double bytes) {
    return rounds * p.intra.alpha_s + rounds * p.intra.overhead_s + bytes * p.intra.beta_s;
  };
  // broadcast binomial_tree, 1000 B: 4 ranks on 4 cores wait for nothing (2 rounds, 2000 B).
  EXPECT_NEAR(PredictV2(Collective::kBroadcast, "binomial_tree", 4, 1000), plain(2, 2000), 1e-15);
  // 8 ranks on 4 cores: 3 rounds and the root's 3000 B, plus the call's wait, each round's and each byte's the
  // average rank moves (7/8 of 1000 B: the cores copy every rank's bytes, not 8 times the root's), times one rank
  // beyond the cores per core; 6 ranks on 4 cores (the same rounds, 5/6 of 1000 B on average): half that wait.
  const Oversubscribed& o = p.oversubscribed;
  const double wait8 = o.call_s + 3 * o.round_s + 875 * o.byte_s;
  const double wait6 = o.call_s + 3 * o.round_s + 5000.0 / 6 * o.byte_s;
  EXPECT_NEAR(PredictV2(Collective::kBroadcast, "binomial_tree", 8, 1000), plain(3, 3000) + wait8, 1e-15);
  EXPECT_NEAR(PredictV2(Collective::kBroadcast, "binomial_tree", 6, 1000), plain(3, 3000) + wait6 / 2, 1e-15);
  // A ring's ranks all move as much: the wait counts its bytes whole.
  EXPECT_NEAR(
      PredictV2(Collective::kAllgather, "ring", 8, 8 << 20) - PredictV2(Collective::kAllgather, "ring", 4, 8 << 20),
      o.call_s + 7 * o.round_s + 7.0 * (1 << 20) * o.byte_s + 4 * (p.intra.alpha_s + p.intra.overhead_s) +
          (7.0 - 6.0) * (1 << 20) * p.intra.beta_s,
      1e-12);
  // A mailbox exchange is a round too.
  EXPECT_NEAR(PredictV2(Collective::kAllgather, "direct", 8, 800),
              p.mailbox_s + 700 * p.intra.beta_s + o.call_s + o.round_s + 700 * o.byte_s, 1e-15);
}

TEST(Predict, VersionTwoAddsEveryCallsOwnCost) {
  std::string text = kProfileV2;
  text.insert(text.find("\"mailbox_us\""), "\"call_us\": 0.4, ");
  auto p = ParseProfile(text, "call");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->call_s, 0.4e-6);
  for (const char* alg : {"ring", "one_shot"}) {
    auto with = PredictSeconds(*p, Collective::kAllreduce, alg, 1, Shape{1, 2}, 64);
    auto without = PredictSeconds(TestProfileV2(), Collective::kAllreduce, alg, 1, Shape{1, 2}, 64);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_NEAR(*with - *without, 0.4e-6, 1e-15) << alg;
  }
}

TEST(Predict, TcpInsideANodeNeedsAProfileThatMeasuredIt) {
  ClusterProfile p = TestProfileV2();
  p.intra_tcp_known = false;
  auto t = PredictSeconds(p, Collective::kAllreduce, "ring", 1, Shape{1, 2}, 8, LinkKind::kTcp);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(t.status().message(), "never measured link=tcp inside a node")) << t.status();
  // shm and auto are predicted; so is tcp from a profile that measured it (its own rate, not the shm one).
  EXPECT_TRUE(PredictSeconds(p, Collective::kAllreduce, "ring", 1, Shape{1, 2}, 8, LinkKind::kShm).ok());
  const double shm = PredictV2(Collective::kAllreduce, "ring", 2, 1 << 20, LinkKind::kShm);
  const double tcp = PredictV2(Collective::kAllreduce, "ring", 2, 1 << 20, LinkKind::kTcp);
  const ClusterProfile q = TestProfileV2();
  EXPECT_NEAR(tcp - shm,
              2 * (q.intra_tcp.alpha_s - q.intra.alpha_s) + 2 * (q.intra_tcp.overhead_s - q.intra.overhead_s) +
                  (1 << 20) * (q.intra_tcp.beta_s - q.intra.beta_s),
              1e-12);
}

TEST(Check, ComparesAgainstTheSameMediansTheFitUses) {
  // Three repeats, one an outlier: the check's error is that of the median (2 us), as in the fit.
  const ClusterProfile p = TestProfileV2();
  const double predicted = *PredictSeconds(p, Collective::kAllreduce, "ring", 1, Shape{1, 2}, 8);
  const std::vector<Measurement> ms = {{Collective::kAllreduce, "ring", Shape{1, 2}, 8, 2e-6},
                                       {Collective::kAllreduce, "ring", Shape{1, 2}, 8, 1e-3},
                                       {Collective::kAllreduce, "ring", Shape{1, 2}, 8, 1.9e-6}};
  ASSERT_EQ(Medians(ms).size(), 1u);
  EXPECT_DOUBLE_EQ(Medians(ms)[0].seconds, 2e-6);
  const CheckReport r = Check(p, ms);
  ASSERT_EQ(r.buckets.size(), 1u);
  EXPECT_NEAR(r.buckets[0].median_error, std::fabs(predicted - 2e-6) / 2e-6, 1e-12);
}

}  // namespace
}  // namespace hccltune::model

namespace hccltune::model {
namespace {

// An emulated cluster: every node's ranks share the host's cores, so 2 nodes x 2 ranks on 2 cores wait as 4 ranks
// on 2 cores would (one rank beyond the cores per core), and the rounds between nodes wait at their own rate.
TEST(Predict, SharedCoresCountEveryNodesRanksAndTheNetworkWaitsAtItsOwnRate) {
  ClusterProfile p = TestProfileV2();
  p.cores_per_node = 2;
  p.inter_oversubscribed = {20e-6, 10e-6, 1e-9};
  const Shape two_by_two{2, 2};
  auto apart = PredictSeconds(p, Collective::kAllreduce, "ring", 512 * 1024, two_by_two, 4096);
  p.cores_shared = true;
  auto shared = PredictSeconds(p, Collective::kAllreduce, "ring", 512 * 1024, two_by_two, 4096);
  ASSERT_TRUE(apart.ok() && shared.ok());
  auto t = CostTerms(Collective::kAllreduce, "ring", 512 * 1024, two_by_two, 4096,
                     {p.nics_per_node, 2, 2, LinkKind::kAuto, /*cores_shared=*/true});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->excess, 1.0);
  EXPECT_DOUBLE_EQ(t->inter_calls, 1.0);
  const double inside =
      p.oversubscribed.call_s + t->rounds() * p.oversubscribed.round_s + t->wait_bytes() * p.oversubscribed.byte_s;
  const double across = 20e-6 + t->s_inter * 10e-6 + t->b_inter * 1e-9;
  EXPECT_NEAR(*shared - *apart, inside + across, 1e-12);
  // 3 nodes x 2 ranks on 2 shared cores: two ranks beyond the cores per core.
  auto six = CostTerms(Collective::kAllreduce, "ring", 512 * 1024, Shape{3, 2}, 4096,
                       {p.nics_per_node, 2, 2, LinkKind::kAuto, /*cores_shared=*/true});
  ASSERT_TRUE(six.ok());
  EXPECT_DOUBLE_EQ(six->excess, 2.0);
}

TEST(Profile, SharedCoresAndTheNetworksWaitAreReadAndWrittenBack) {
  std::string text = kProfileV2;
  text.insert(text.find("\"mailbox_us\""),
              R"("cores_shared": true, "inter_oversubscribed": {"call_us": 20, "round_us": 10, "byte_ns": 1}, )");
  auto p = ParseProfile(text, "shared");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->cores_shared);
  EXPECT_DOUBLE_EQ(p->inter_oversubscribed.round_s, 10e-6);
  auto back = ParseProfile(ProfileToJson(*p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->cores_shared);
  EXPECT_NEAR(back->inter_oversubscribed.call_s, 20e-6, 1e-15);
  EXPECT_NEAR(back->inter_oversubscribed.byte_s, 1e-9, 1e-18);
  const std::string base = R"("intra": {"latency_us": 1, "message_us": 0, "bandwidth_GBps": 1}, "reduce_GBps": 1)";
  for (const char* extra : {R"("cores_shared": true)", R"("inter_oversubscribed": {})"}) {
    auto v1 = ParseProfile("{" + base + ", " + extra + "}", "x.json");
    ASSERT_FALSE(v1.ok()) << extra;
    EXPECT_TRUE(absl::StrContains(v1.status().message(), "needs \"version\": 2")) << v1.status();
  }
  auto bad = ParseProfile("{" + base + R"(, "version": 2, "cores_shared": 1})", "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "cores_shared must be true or false")) << bad.status();
}

// Measurements of an emulated cluster (nodes sharing 2 cores): the fit recovers the network's wait for a core.
TEST(Fit, RecoversTheNetworksWaitWhenNodesShareTheCores) {
  ClusterProfile truth = TestProfile();
  truth.version = kProfileVersion;
  truth.cores_per_node = 2;
  truth.cores_shared = true;
  truth.call_s = 0.2e-6;
  truth.oversubscribed = {3e-6, 0.8e-6, 0.05e-9};
  truth.inter_oversubscribed = {25e-6, 15e-6, 1e-9};
  const auto ms = Synthetic(truth, {{1, 2}, {1, 3}, {1, 4}, {2, 1}, {2, 2}, {3, 1}, {3, 2}});
  FitOptions options{"t", truth.nics_per_node, truth.cores_per_node, /*cores_shared=*/true};
  auto fit = Fit(ms, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const ClusterProfile& p = fit->profile;
  EXPECT_TRUE(p.cores_shared);
  EXPECT_NEAR(p.oversubscribed.round_s, truth.oversubscribed.round_s, 1e-3 * truth.oversubscribed.round_s);
  EXPECT_NEAR(p.inter_oversubscribed.call_s, truth.inter_oversubscribed.call_s,
              0.1 * truth.inter_oversubscribed.call_s);
  EXPECT_NEAR(p.inter_oversubscribed.round_s, truth.inter_oversubscribed.round_s,
              0.1 * truth.inter_oversubscribed.round_s);
  const CheckReport r = Check(p, ms);
  for (const auto& [c, s] : r.summary) EXPECT_LT(s.median_error, 0.05) << CollectiveName(c);
}

}  // namespace
}  // namespace hccltune::model

// The cost model's single-copy and average-bytes terms: what a node's receivers pull and what its cores copy.
#include <cmath>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "model/fit.h"
#include "model/formula.h"
#include "model/predict.h"
#include "model/profile.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"
#include "tests/unit/model/test_profiles.h"

namespace hccltune::model {
namespace {

TEST(Predict, ALinearBroadcastsReceiversPullFromTheSingleCopySizeOn) {
  ClusterProfile p = TestProfileV2();
  p.single_copy_bytes = 32 << 10;
  p.cores_per_node = 0;
  const auto bytes_of = [&](const ClusterProfile& pr, const Shape& shape, uint64_t n, LinkKind link) {
    Configuration config = *Configuration::Default("linear");
    config.link.kind = link;
    auto t = ConfigTerms(Collective::kBroadcast, config, shape, n,
                         {pr.nics_per_node, pr.cores_per_node, pr.version, link, pr.cores_shared,
                          SingleCopyBytesAt(pr.single_copy_bytes, shape.ranks_per_node, pr.cores_per_node)});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->b_intra : NAN;
  };
  // 4 ranks: below the size the root's three copies; from it every receiver reads its own n at once.
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 4}, 16 << 10, LinkKind::kAuto), 3.0 * (16 << 10));
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 4}, 32 << 10, LinkKind::kAuto), 32 << 10);
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 4}, 32 << 10, LinkKind::kShm), 32 << 10);
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 4}, 32 << 10, LinkKind::kTcp), 3.0 * (32 << 10));  // tcp never single-copies
  // The runtime doubles the size when the node's ranks outnumber its cores.
  p.cores_per_node = 2;
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 4}, 32 << 10, LinkKind::kAuto), 3.0 * (32 << 10));
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 4}, 64 << 10, LinkKind::kAuto), 64 << 10);
  EXPECT_DOUBLE_EQ(bytes_of(p, {1, 2}, 32 << 10, LinkKind::kAuto), 32 << 10);
  // Without a size (0) nothing is pulled; the prediction follows the bytes.
  ClusterProfile none = p;
  none.single_copy_bytes = 0;
  EXPECT_DOUBLE_EQ(bytes_of(none, {1, 4}, 1 << 20, LinkKind::kAuto), 3.0 * (1 << 20));
  auto pulled = PredictSeconds(p, Collective::kBroadcast, "linear", 0, Shape{1, 4}, 1 << 20);
  auto copied = PredictSeconds(none, Collective::kBroadcast, "linear", 0, Shape{1, 4}, 1 << 20);
  ASSERT_TRUE(pulled.ok() && copied.ok());
  EXPECT_LT(*pulled, *copied);
  // Only broadcast's linear has a pulled cost so far.
  EXPECT_EQ(registry::Cost(Collective::kBroadcast, "linear")->pulled, "n");
  EXPECT_TRUE(registry::Cost(Collective::kBroadcast, "binomial_tree")->pulled.empty());
}

TEST(Profile, TheSingleCopySizeIsReadAndWrittenBack) {
  const std::string base = R"("intra": {"latency_us": 1, "message_us": 0, "bandwidth_GBps": 1}, "reduce_GBps": 1)";
  auto p = ParseProfile("{" + base + R"(, "version": 2, "single_copy_bytes": 16384})", "x.json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->single_copy_bytes, 16384u);
  auto back = ParseProfile(ProfileToJson(*p), "round trip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->single_copy_bytes, 16384u);
  for (const char* bad : {"-1", "1.5", "\"8K\"", "2147483648"}) {
    auto b = ParseProfile("{" + base + R"(, "version": 2, "single_copy_bytes": )" + bad + "}", "x.json");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(b.status().message(), "single_copy_bytes must be an integer")) << b.status();
  }
  auto v1 = ParseProfile("{" + base + R"(, "single_copy_bytes": 8192})", "x.json");
  ASSERT_FALSE(v1.ok());
  EXPECT_TRUE(absl::StrContains(v1.status().message(), "single_copy_bytes needs \"version\": 2")) << v1.status();
}

TEST(Fit, FindsTheSingleCopySizeThatMadeTheMeasurements) {
  ClusterProfile truth = TestProfile();
  truth.version = kProfileVersion;
  truth.cores_per_node = 2;
  truth.call_s = 0.2e-6;
  truth.oversubscribed = {3e-6, 0.8e-6, 0.05e-9};
  const std::vector<Shape> shapes = {{1, 2}, {1, 3}, {1, 4}};
  for (uint64_t size : {uint64_t{0}, uint64_t{32} << 10}) {
    truth.single_copy_bytes = size;
    auto fit = Fit(Synthetic(truth, shapes), {"t", 1, truth.cores_per_node});
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(fit->profile.single_copy_bytes, size);
    EXPECT_NEAR(fit->profile.intra.beta_s, truth.intra.beta_s, 1e-3 * truth.intra.beta_s) << size;
  }
  // A size given (the runtime's log names it) is kept, not fitted.
  FitOptions given{"t", 1, truth.cores_per_node};
  given.single_copy_bytes = 8192;
  auto fit = Fit(Synthetic(truth, shapes), given);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->profile.single_copy_bytes, 8192u);
}

TEST(Registry, AMeanIsWrittenOnlyWhereTheBusiestRankMovesMore) {
  int written = 0;
  for (Collective c : AllCollectives()) {
    for (const std::string& name : registry::AlgorithmsFor(c)) {
      const registry::AlgorithmCost* cost = registry::Cost(c, name);
      ASSERT_NE(cost, nullptr);
      if (cost->mean.empty()) continue;
      ++written;
      auto mean = Formula::Parse(cost->mean);
      auto bytes = Formula::Parse(cost->bytes);
      ASSERT_TRUE(mean.ok() && bytes.ok()) << cost->mean;
      for (double p : {2.0, 3.0, 4.0, 8.0, 64.0}) {
        FormulaVars v;
        v.p = v.l = p, v.n = 1 << 20;
        EXPECT_LE(mean->Eval(v), bytes->Eval(v)) << CollectiveName(c) << " " << name << " p=" << p;
        if (p >= 4) {
          EXPECT_LT(mean->Eval(v), bytes->Eval(v)) << CollectiveName(c) << " " << name << " p=" << p;
        }
      }
    }
  }
  EXPECT_GE(written, 4);
}

}  // namespace
}  // namespace hccltune::model

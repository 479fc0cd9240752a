// hccl-tuned's Prometheus exposition (daemon/metrics.h): buckets, bounds, escaping and the state sources.
#include "daemon/metrics.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hccltune::daemon {
namespace {

db::LiveSample Sample(uint64_t bytes, double us, const std::string& config = "ring") {
  return db::LiveSample{Collective::kAllreduce, DataType::kFloat32, 4, bytes, config, us, 0};
}

bool Has(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

TEST(Metrics, SizeBucketsArePowersOfFour) {
  EXPECT_EQ(Metrics::SizeBucket(0), "0");
  EXPECT_EQ(Metrics::SizeBucket(1), "1");
  EXPECT_EQ(Metrics::SizeBucket(3), "1");
  EXPECT_EQ(Metrics::SizeBucket(8), "4");
  EXPECT_EQ(Metrics::SizeBucket(1023), "256");
  EXPECT_EQ(Metrics::SizeBucket(1024), "1K");
  EXPECT_EQ(Metrics::SizeBucket(5000), "4K");
  EXPECT_EQ(Metrics::SizeBucket(300 << 10), "256K");
  EXPECT_EQ(Metrics::SizeBucket(64 << 20), "64M");
  EXPECT_EQ(Metrics::SizeBucket(uint64_t{1} << 40), "1T");
}

TEST(Metrics, HistogramIsCumulativeAndCountsEveryCall) {
  Metrics m({});
  m.Observe("fp1", std::vector<db::LiveSample>{Sample(8, 3), Sample(8, 3), Sample(8, 500), Sample(8, 7e6)});
  const std::string t = m.Render();
  const std::string l = R"(topology="fp1",collective="allreduce",size_bucket="4")";
  EXPECT_TRUE(Has(t, "hccltune_call_duration_seconds_bucket{" + l + ",le=\"1e-06\"} 0")) << t;
  EXPECT_TRUE(Has(t, "hccltune_call_duration_seconds_bucket{" + l + ",le=\"4e-06\"} 2")) << t;
  EXPECT_TRUE(Has(t, "hccltune_call_duration_seconds_bucket{" + l + ",le=\"0.001\"} 3")) << t;
  EXPECT_TRUE(Has(t, "hccltune_call_duration_seconds_bucket{" + l + ",le=\"4\"} 3")) << t;
  EXPECT_TRUE(Has(t, "hccltune_call_duration_seconds_bucket{" + l + ",le=\"+Inf\"} 4")) << t;
  EXPECT_TRUE(Has(t, "hccltune_call_duration_seconds_count{" + l + "} 4")) << t;
  EXPECT_TRUE(Has(t, "hccltune_call_bytes_total{" + l + "} 32")) << t;
  EXPECT_TRUE(Has(t, "hccltune_calls_total{" + l + ",configuration=\"ring\"} 4")) << t;
  EXPECT_TRUE(Has(t, "# TYPE hccltune_call_duration_seconds histogram")) << t;
}

TEST(Metrics, LabelsAreBoundedAndEscaped) {
  Metrics m({});
  std::vector<db::LiveSample> v;
  for (size_t i = 0; i < Metrics::kMaxConfigsPerCollective + 3; ++i) v.push_back(Sample(8, 1, "c" + std::to_string(i)));
  v.push_back(Sample(8, 1, "a\"b\\c"));
  m.Observe("fp", v);
  std::string t = m.Render();
  EXPECT_TRUE(
      Has(t, R"(hccltune_calls_total{topology="fp",collective="allreduce",size_bucket="4",configuration="other"} 4)"))
      << t;
  EXPECT_EQ(t.find("configuration=\"c8\""), std::string::npos);
  // Series: beyond kMaxSeries (topology, collective, bucket) triples, samples are only counted.
  for (size_t i = 0; i <= Metrics::kMaxSeries; ++i) m.Observe("t" + std::to_string(i), {Sample(8, 1)});
  t = m.Render();
  EXPECT_TRUE(Has(t, "hccltune_metrics_samples_unlabelled_total 2")) << t.substr(t.size() - 2000);
  Metrics esc({});
  esc.Observe("a\"b", std::vector<db::LiveSample>{Sample(8, 1, "x\\y")});
  t = esc.Render();
  EXPECT_NE(t.find(R"(topology="a\"b")"), std::string::npos) << t;
  EXPECT_NE(t.find(R"(configuration="x\\y")"), std::string::npos) << t;
}

TEST(Metrics, StateComesFromTheSourcesAtEachRender) {
  int versions = 1;
  Metrics::Sources src;
  src.table_versions = [&] { return std::vector<std::pair<std::string, int64_t>>{{"fp", versions}}; };
  src.online_actions = [] { return std::vector<std::pair<std::string, uint64_t>>{{"explore", 3}}; };
  src.running_sweeps = [] { return std::vector<Metrics::Sweep>{{"sw-1", 0.25}}; };
  src.dropped_samples = [] { return std::vector<std::pair<std::string, uint64_t>>{{"ingest_queue", 7}}; };
  src.report_errors = [] { return uint64_t{2}; };
  Metrics m(src);
  std::string t = m.Render();
  EXPECT_TRUE(Has(t, R"(hccltune_table_version{topology="fp"} 1)")) << t;
  EXPECT_TRUE(Has(t, R"(hccltune_online_actions_total{kind="explore"} 3)")) << t;
  EXPECT_TRUE(Has(t, "hccltune_sweeps_running 1")) << t;
  EXPECT_TRUE(Has(t, R"(hccltune_sweep_progress_ratio{sweep="sw-1"} 0.25)")) << t;
  EXPECT_TRUE(Has(t, R"(hccltune_live_samples_dropped_total{where="ingest_queue"} 7)")) << t;
  EXPECT_TRUE(Has(t, "hccltune_report_errors_total 2")) << t;
  versions = 5;
  EXPECT_TRUE(Has(m.Render(), R"(hccltune_table_version{topology="fp"} 5)"));
}

}  // namespace
}  // namespace hccltune::daemon

// hccl-tuned's Prometheus metrics (docs/DEPLOYMENT.md, "Metrics"): what the daemon sees, in the text exposition
// format 0.0.4, served by daemon/metrics_http.h on GET /metrics.
//
// From the live timings jobs report (ReportTimings), per topology fingerprint, collective and size bucket (the
// call's bytes rounded down to a power of 4: "0", "1", "4", ... "1K", "4K", ... "1G"):
//   hccltune_calls_total{topology,collective,size_bucket,configuration}   counter
//   hccltune_call_duration_seconds{topology,collective,size_bucket}       histogram (per-rank call durations)
//   hccltune_call_bytes_total{topology,collective,size_bucket}            counter
//   hccltune_busbw_gbps{topology,collective,size_bucket}                  gauge: bus bandwidth of the last batch
// The label set is bounded: at most kMaxConfigsPerCollective configurations per (topology, collective) — further
// ones count as configuration="other" — and at most kMaxSeries (topology, collective, size bucket) series; samples
// beyond are counted in hccltune_metrics_samples_unlabelled_total only.
// From the daemon's own state, read at each scrape through the Sources callbacks: table versions
// (hccltune_table_version{topology}), the online policy's decisions by kind (hccltune_online_actions_total{kind};
// explore and stale are the regressions detected), sweeps running and their progress
// (hccltune_sweeps_running, hccltune_sweep_progress_ratio{sweep}), and errors: live samples dropped
// (hccltune_live_samples_dropped_total{where}) and rejected report batches (hccltune_report_errors_total).
//
// Thread-safety: every method may be called from any thread; Observe is one short critical section per batch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "db/tuning_store.h"

namespace hccltune::daemon {

class Metrics {
 public:
  static constexpr size_t kMaxSeries = 2048;
  static constexpr size_t kMaxConfigsPerCollective = 8;
  // Upper bounds (seconds) of the duration histogram's buckets; +Inf is implied.
  static const std::vector<double>& DurationBuckets();

  struct Sweep {
    std::string id;
    double progress = 0;  // 0..1
  };
  // Read at every scrape; each may be empty.
  struct Sources {
    std::function<std::vector<std::pair<std::string, int64_t>>()> table_versions;   // (fingerprint, version)
    std::function<std::vector<std::pair<std::string, uint64_t>>()> online_actions;  // (kind, count)
    std::function<std::vector<Sweep>()> running_sweeps;
    std::function<std::vector<std::pair<std::string, uint64_t>>()> dropped_samples;  // (where, count)
    std::function<uint64_t()> report_errors;  // ReportTimings batches refused as bad input
  };

  explicit Metrics(Sources sources) : sources_(std::move(sources)) {}

  // One accepted batch of live samples of topology `fingerprint`.
  void Observe(const std::string& fingerprint, absl::Span<const db::LiveSample> samples);

  // The whole exposition text.
  std::string Render() const;

  // "0", "1", "4", "16", "64", "256", "1K", ... : `bytes` rounded down to a power of 4.
  static std::string SizeBucket(uint64_t bytes);

 private:
  using SeriesKey = std::tuple<std::string, std::string, std::string>;  // topology, collective, size bucket
  struct Series {
    std::vector<uint64_t> bucket_counts;  // per DurationBuckets() entry, not cumulative; last = +Inf
    double sum_seconds = 0;
    uint64_t count = 0;
    double bytes = 0;
    double busbw_gbps = 0;
    std::map<std::string, uint64_t> calls_by_config;
  };
  // The configuration label for `config` within (topology, collective): itself while fewer than the bound are
  // known, else "other".
  std::string ConfigLabel(const std::string& fp, const std::string& coll, const std::string& config)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RenderLive(std::string* out) const;
  void RenderState(std::string* out) const;

  const Sources sources_;
  mutable absl::Mutex mu_;
  std::map<SeriesKey, Series> series_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> configs_ ABSL_GUARDED_BY(mu_);
  uint64_t unlabelled_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hccltune::daemon

#include "daemon/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/common/types.h"

namespace hccltune::daemon {
namespace {

// A label value with \, " and newline escaped (text format 0.0.4).
std::string Escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return absl::StrFormat("%.9g", v);
}

void Header(std::string* out, const char* name, const char* type, const char* help) {
  absl::StrAppend(out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

const std::vector<double>& Metrics::DurationBuckets() {
  static const std::vector<double> b = {1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3, 4e-3, 16e-3, 64e-3, 0.256, 1, 4};
  return b;
}

std::string Metrics::SizeBucket(uint64_t bytes) {
  if (bytes == 0) return "0";
  int shift = 0;
  while (shift + 2 < 64 && (bytes >> (shift + 2)) != 0) shift += 2;
  static const char* kUnits[] = {"", "K", "M", "G", "T", "P", "E"};
  return absl::StrCat(uint64_t{1} << (shift % 10), kUnits[shift / 10]);
}

std::string Metrics::ConfigLabel(const std::string& fp, const std::string& coll, const std::string& config) {
  std::vector<std::string>& known = configs_[{fp, coll}];
  if (std::find(known.begin(), known.end(), config) != known.end()) return config;
  if (known.size() >= kMaxConfigsPerCollective) return "other";
  known.push_back(config);
  return config;
}

void Metrics::Observe(const std::string& fingerprint, absl::Span<const db::LiveSample> samples) {
  const std::vector<double>& bounds = DurationBuckets();
  absl::MutexLock lock(&mu_);
  for (const db::LiveSample& s : samples) {
    const std::string coll(CollectiveName(s.collective));
    SeriesKey key{fingerprint, coll, SizeBucket(s.bytes)};
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= kMaxSeries) {
        ++unlabelled_;
        continue;
      }
      it = series_.emplace(std::move(key), Series{}).first;
      it->second.bucket_counts.assign(bounds.size() + 1, 0);
    }
    Series& ser = it->second;
    const double seconds = s.duration_us * 1e-6;
    const size_t b = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), seconds) - bounds.begin());
    ++ser.bucket_counts[b];
    ser.sum_seconds += seconds;
    ++ser.count;
    ser.bytes += static_cast<double>(s.bytes);
    if (s.duration_us > 0) {
      ser.busbw_gbps = static_cast<double>(s.bytes) / (s.duration_us * 1e3) *
                       BusBandwidthFactor(s.collective, std::max(1, s.world_size));
    }
    ++ser.calls_by_config[ConfigLabel(fingerprint, coll, s.configuration)];
  }
}

void Metrics::RenderLive(std::string* out) const {
  absl::MutexLock lock(&mu_);
  const std::vector<double>& bounds = DurationBuckets();
  auto labels = [](const SeriesKey& k) {
    return absl::StrCat("topology=\"", Escape(std::get<0>(k)), "\",collective=\"", std::get<1>(k), "\",size_bucket=\"",
                        std::get<2>(k), "\"");
  };
  Header(out, "hccltune_calls_total", "counter", "Live calls reported by jobs, by configuration.");
  for (const auto& [k, s] : series_) {
    for (const auto& [config, n] : s.calls_by_config) {
      absl::StrAppend(out, "hccltune_calls_total{", labels(k), ",configuration=\"", Escape(config), "\"} ", n, "\n");
    }
  }
  Header(out, "hccltune_call_duration_seconds", "histogram", "Per-rank durations of the live calls reported.");
  for (const auto& [k, s] : series_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds.size(); ++i) {
      cumulative += s.bucket_counts[i];
      const std::string le = i < bounds.size() ? Num(bounds[i]) : "+Inf";
      absl::StrAppend(out, "hccltune_call_duration_seconds_bucket{", labels(k), ",le=\"", le, "\"} ", cumulative, "\n");
    }
    absl::StrAppend(out, "hccltune_call_duration_seconds_sum{", labels(k), "} ", Num(s.sum_seconds), "\n");
    absl::StrAppend(out, "hccltune_call_duration_seconds_count{", labels(k), "} ", s.count, "\n");
  }
  Header(out, "hccltune_call_bytes_total", "counter", "Bytes of the live calls reported (docs/CONVENTIONS.md).");
  for (const auto& [k, s] : series_)
    absl::StrAppend(out, "hccltune_call_bytes_total{", labels(k), "} ", Num(s.bytes), "\n");
  Header(out, "hccltune_busbw_gbps", "gauge", "Bus bandwidth of the last live call reported, GB/s.");
  for (const auto& [k, s] : series_)
    absl::StrAppend(out, "hccltune_busbw_gbps{", labels(k), "} ", Num(s.busbw_gbps), "\n");
  Header(out, "hccltune_metrics_samples_unlabelled_total", "counter",
         "Live samples not in any series: the series bound was reached.");
  absl::StrAppend(out, "hccltune_metrics_samples_unlabelled_total ", unlabelled_, "\n");
}

void Metrics::RenderState(std::string* out) const {
  Header(out, "hccltune_table_version", "gauge", "Latest version of each stored table.");
  if (sources_.table_versions) {
    for (const auto& [fp, v] : sources_.table_versions()) {
      absl::StrAppend(out, "hccltune_table_version{topology=\"", Escape(fp), "\"} ", v, "\n");
    }
  }
  Header(out, "hccltune_online_actions_total", "counter",
         "Online policy decisions by kind (explore and stale: regressions detected).");
  if (sources_.online_actions) {
    for (const auto& [kind, n] : sources_.online_actions()) {
      absl::StrAppend(out, "hccltune_online_actions_total{kind=\"", kind, "\"} ", n, "\n");
    }
  }
  const std::vector<Sweep> sweeps = sources_.running_sweeps ? sources_.running_sweeps() : std::vector<Sweep>{};
  Header(out, "hccltune_sweeps_running", "gauge", "Sweeps this daemon runs now.");
  absl::StrAppend(out, "hccltune_sweeps_running ", sweeps.size(), "\n");
  Header(out, "hccltune_sweep_progress_ratio", "gauge", "Share of a running sweep's candidates measured.");
  for (const Sweep& s : sweeps) {
    absl::StrAppend(out, "hccltune_sweep_progress_ratio{sweep=\"", Escape(s.id), "\"} ", Num(s.progress), "\n");
  }
  Header(out, "hccltune_live_samples_dropped_total", "counter", "Live samples dropped, by where.");
  if (sources_.dropped_samples) {
    for (const auto& [where, n] : sources_.dropped_samples()) {
      absl::StrAppend(out, "hccltune_live_samples_dropped_total{where=\"", where, "\"} ", n, "\n");
    }
  }
  Header(out, "hccltune_report_errors_total", "counter", "ReportTimings batches refused as bad input.");
  absl::StrAppend(out, "hccltune_report_errors_total ", sources_.report_errors ? sources_.report_errors() : 0, "\n");
}

std::string Metrics::Render() const {
  std::string out;
  RenderLive(&out);
  RenderState(&out);
  return out;
}

}  // namespace hccltune::daemon

#include "model/check.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "runtime/common/configuration.h"

namespace hccltune::model {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

BucketCheck CheckBucket(std::vector<CheckedPoint> points) {
  std::stable_sort(points.begin(), points.end(),
                   [](const CheckedPoint& a, const CheckedPoint& b) { return a.measured_s < b.measured_s; });
  BucketCheck b;
  b.candidates = points.size();
  std::vector<double> errors;
  const CheckedPoint* best_measured = &points[0];  // sorted
  const CheckedPoint* best_predicted = &points[0];
  for (const CheckedPoint& p : points) {
    errors.push_back(std::fabs(p.predicted_s - p.measured_s) / p.measured_s);
    if (p.predicted_s < best_predicted->predicted_s) best_predicted = &p;
  }
  b.median_error = Median(errors);
  b.predicted_winner = best_predicted->config;
  b.measured_winner = best_measured->config;
  b.winner_gap = best_predicted->measured_s / best_measured->measured_s - 1;
  b.points = std::move(points);
  return b;
}

}  // namespace

CheckReport Check(const ClusterProfile& profile, absl::Span<const Measurement> measurements) {
  CheckReport out;
  std::map<std::tuple<int, int, int, uint64_t>, std::vector<CheckedPoint>> buckets;
  for (const Measurement& m : Medians(measurements)) {
    auto config = Configuration::Parse(m.configuration);
    absl::StatusOr<double> t = absl::NotFoundError("");
    if (config.ok() && m.seconds > 0) {
      t = PredictSeconds(profile, m.collective, *config, m.shape, m.bytes);
    }
    if (!t.ok()) {
      ++out.skipped;
      continue;
    }
    buckets[{static_cast<int>(m.collective), m.shape.nodes, m.shape.ranks_per_node, m.bytes}].push_back(
        {m.configuration, m.seconds, *t});
  }
  std::map<Collective, std::vector<double>> errors;
  for (const auto& [key, points] : buckets) {
    BucketCheck b = CheckBucket(points);
    b.collective = static_cast<Collective>(std::get<0>(key));
    b.shape = {std::get<1>(key), std::get<2>(key)};
    b.bytes = std::get<3>(key);
    CollectiveSummary& s = out.summary[b.collective];
    ++s.buckets;
    s.within_15 += b.median_error <= 0.15 ? 1 : 0;
    s.winner_ok += b.winner_ok() ? 1 : 0;
    errors[b.collective].push_back(b.median_error);
    out.buckets.push_back(std::move(b));
  }
  for (auto& [c, s] : out.summary) s.median_error = Median(errors[c]);
  return out;
}

}  // namespace hccltune::model

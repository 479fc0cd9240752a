// Checking a profile against measurements (`hccl-tune model check`): per (collective, shape, size) bucket, the
// median over its measured candidates of |predicted - measured| / measured, and whether the candidate the model
// ranks first is within 5% of the best measured one. The figures the model's accuracy is judged by (docs/MODEL.md).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "model/fit.h"
#include "model/profile.h"

namespace hccltune::model {

inline constexpr double kWinnerTolerance = 0.05;

struct CheckedPoint {
  std::string config;
  double measured_s = 0;  // the median of its samples
  double predicted_s = 0;
};

struct BucketCheck {
  Collective collective = Collective::kAllreduce;
  Shape shape;
  uint64_t bytes = 0;
  size_t candidates = 0;         // measured configurations the model could predict
  double median_error = 0;       // over candidates, relative
  std::string predicted_winner;  // configuration the model ranks first among the measured ones
  std::string measured_winner;
  double winner_gap = 0;  // measured time of predicted_winner / best measured - 1
  bool winner_ok() const { return winner_gap <= kWinnerTolerance; }
  std::vector<CheckedPoint> points;  // every measured candidate, fastest measured first
};

struct CollectiveSummary {
  size_t buckets = 0;
  double median_error = 0;  // median over buckets of their median error
  size_t within_15 = 0;     // buckets whose median error is <= 15%
  size_t winner_ok = 0;     // buckets whose predicted winner is within 5% of the best
};

struct CheckReport {
  std::vector<BucketCheck> buckets;
  std::map<Collective, CollectiveSummary> summary;
  size_t skipped = 0;  // measurements the model cannot predict (unknown configuration, network never measured)
};

CheckReport Check(const ClusterProfile& profile, absl::Span<const Measurement> measurements);

}  // namespace hccltune::model

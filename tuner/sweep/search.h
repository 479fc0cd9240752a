// The sweep's measurement protocol and search, independent of how a candidate is run (tuner/sweep/).
//
// Protocol (docs/CONVENTIONS.md, Timing): a Measurer runs `iters` timed iterations of one configuration
// after `warmup` untimed ones, each after a barrier, and returns each iteration's time as the maximum over ranks.
// A candidate's figure is the median of its iterations. Iterations are added in batches, and the candidates of
// one point (collective, dtype, bytes) are interleaved batch by batch (the order rotates every round), so drift
// of the machine during a point does not favour one candidate. A candidate is finished when the distribution-
// free 95% confidence interval of its median (order statistics) is within ±target_rel_ci of the median, or
// when its measured time reaches the per-candidate cap, or at max_iters.
//
// Search: exhaustive measures every candidate until it is finished. The pruned default (racing / successive
// elimination with confidence bounds) also stops measuring a candidate as soon as the lower bound of its
// median's interval is above the upper bound of the current best's by more than the precision target —
// it is then clearly worse (near-ties are measured to the end). The candidate
// order of a point is seeded by the ranking at the previous size (a cost model fitted on the fly: neighbouring
// sizes rank alike), so good candidates are measured first. The built-in default is never pruned: its margin
// is reported. Every decision is a deterministic function of the samples, so replaying stored samples (resume)
// reaches the same state.
//
// Thread-safety: a Search is used from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/types.h"

namespace hccltune::sweep {

struct Point {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  uint64_t bytes = 0;
};

struct Batch {
  std::vector<double> time_us;       // per iteration: max over ranks
  std::vector<double> rank_time_us;  // per iteration: mean over ranks of each rank's own call duration
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  virtual absl::StatusOr<Batch> Measure(const Point& point, const std::string& config, int iters, int warmup) = 0;
};

struct SearchOptions {
  bool exhaustive = false;
  double target_rel_ci = 0.03;  // half-width of the 95% CI of the median, relative to the median
  int first_batch = 3;          // iterations of a candidate's first batch (below min_iters: prune first)
  int batch = 5;                // iterations of later batches
  int min_iters = 5;            // before a candidate may finish
  int max_iters = 200;
  double cap_us = 300e3;  // per candidate: stop once its timed iterations add up to this
};

// Median and its distribution-free 95% confidence interval.
struct MedianCI {
  double median = 0, lo = 0, hi = 0;
  double rel_half_width() const { return median > 0 ? (hi - lo) / 2 / median : 0; }
};
MedianCI MedianWithCI(std::vector<double> samples);

enum class CandidateState : uint8_t { kMeasuring, kConverged, kCapped, kPruned };
const char* CandidateStateName(CandidateState s);

struct CandidateResult {
  std::string config;
  CandidateState state = CandidateState::kMeasuring;
  std::vector<double> time_us, rank_time_us;
  MedianCI stat;
  double measured_us = 0;  // sum of timed iterations
};

struct PointResult {
  Point point;
  std::vector<CandidateResult> candidates;  // in the order given
  int winner = -1;                          // index of the lowest median
  int runner_up = -1;                       // second lowest, -1 when alone
  int default_index = -1;                   // the built-in default's candidate
};

struct SearchStats {
  uint64_t candidates = 0, pruned = 0, iterations = 0;
  double measured_us = 0;
  // Iterations the pruned candidates would have needed to finish, estimated from the finished ones of their
  // point (what pruning saved), and its time at the pruned candidates' medians.
  double saved_iterations = 0, saved_us = 0;
};

struct Progress {
  uint64_t done = 0, total = 0;  // candidates finished / to measure (all points)
  const Point* point = nullptr;
  const std::string* config = nullptr;
};

class Search {
 public:
  Search(SearchOptions options, Measurer* measurer) : options_(options), measurer_(measurer) {}

  // Called after every batch (to keep samples) and after every round (progress). Either may be empty.
  std::function<absl::Status(const Point&, const std::string& config, const Batch&)> on_batch;
  std::function<void(const Progress&)> on_progress;
  // Checked before every batch; returning true stops the search with CancelledError.
  std::function<bool()> should_stop;

  // Measures every point in order. `candidates[i]` are the canonical configurations of `points[i]`, and
  // `defaults[i]` the built-in default's (added when not among them).
  absl::StatusOr<std::vector<PointResult>> Run(const std::vector<Point>& points,
                                               const std::vector<std::vector<std::string>>& candidates,
                                               const std::vector<std::string>& defaults);

  const SearchStats& stats() const { return stats_; }

 private:
  absl::StatusOr<PointResult> RunPoint(const Point& p, std::vector<std::string> configs, const std::string& dflt);

  SearchOptions options_;
  Measurer* measurer_;
  SearchStats stats_;
  Progress progress_;
  std::vector<std::string> previous_ranking_;  // configurations of the previous point, best first
};

}  // namespace hccltune::sweep

#include "tuner/sweep/search.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"

namespace hccltune::sweep {

MedianCI MedianWithCI(std::vector<double> x) {
  MedianCI r;
  if (x.empty()) return r;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  r.median = n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
  // Ranks of the order statistics bounding the median with ~95% confidence (normal approximation of the
  // binomial(n, 1/2) count below the median).
  const double half = 1.96 * std::sqrt(static_cast<double>(n)) / 2;
  const double c = static_cast<double>(n) / 2;
  const auto lo = static_cast<ptrdiff_t>(std::floor(c - half));
  const auto hi = static_cast<ptrdiff_t>(std::ceil(c + half)) - 1;
  r.lo = x[static_cast<size_t>(std::clamp<ptrdiff_t>(lo, 0, static_cast<ptrdiff_t>(n) - 1))];
  r.hi = x[static_cast<size_t>(std::clamp<ptrdiff_t>(hi, 0, static_cast<ptrdiff_t>(n) - 1))];
  return r;
}

const char* CandidateStateName(CandidateState s) {
  switch (s) {
    case CandidateState::kMeasuring: return "measuring";
    case CandidateState::kConverged: return "converged";
    case CandidateState::kCapped: return "capped";
    case CandidateState::kPruned: return "pruned";
  }
  return "?";
}

absl::StatusOr<std::vector<PointResult>> Search::Run(const std::vector<Point>& points,
                                                     const std::vector<std::vector<std::string>>& candidates,
                                                     const std::vector<std::string>& defaults) {
  if (candidates.size() != points.size() || defaults.size() != points.size()) {
    return absl::InvalidArgumentError("search: points, candidates and defaults differ in length");
  }
  progress_ = {};
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& c = candidates[i];
    progress_.total += c.size() + (std::find(c.begin(), c.end(), defaults[i]) == c.end() ? 1 : 0);
  }
  std::vector<PointResult> out;
  Collective last_coll = Collective::kBarrier;
  DataType last_dtype = DataType::kInt8;
  for (size_t i = 0; i < points.size(); ++i) {
    if (points[i].collective != last_coll || points[i].dtype != last_dtype) previous_ranking_.clear();
    last_coll = points[i].collective;
    last_dtype = points[i].dtype;
    auto r = RunPoint(points[i], candidates[i], defaults[i]);
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

absl::StatusOr<PointResult> Search::RunPoint(const Point& p, std::vector<std::string> configs,
                                             const std::string& dflt) {
  if (std::find(configs.begin(), configs.end(), dflt) == configs.end()) configs.push_back(dflt);
  // Measuring order: the previous size's ranking first (cost model), then the rest in the given order.
  std::vector<size_t> order;
  for (const std::string& c : previous_ranking_) {
    auto it = std::find(configs.begin(), configs.end(), c);
    if (it != configs.end()) order.push_back(static_cast<size_t>(it - configs.begin()));
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    if (std::find(order.begin(), order.end(), i) == order.end()) order.push_back(i);
  }
  PointResult res;
  res.point = p;
  for (const std::string& c : configs)
    res.candidates.push_back(CandidateResult{c, CandidateState::kMeasuring, {}, {}, {}, 0});
  res.default_index = static_cast<int>(std::find(configs.begin(), configs.end(), dflt) - configs.begin());
  progress_.point = &res.point;

  for (int round = 0;; ++round) {
    std::vector<size_t> alive;
    for (size_t i : order) {
      if (res.candidates[i].state == CandidateState::kMeasuring) alive.push_back(i);
    }
    if (alive.empty()) break;
    std::rotate(alive.begin(), alive.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(round) % alive.size()),
                alive.end());
    for (size_t i : alive) {
      CandidateResult& c = res.candidates[i];
      if (should_stop && should_stop()) return absl::CancelledError("sweep stopped");
      const bool first = c.time_us.empty();
      const int iters = first ? options_.first_batch : options_.batch;
      auto b = measurer_->Measure(p, c.config, iters, first ? 2 : 1);
      if (!b.ok()) return b.status();
      if (b->time_us.size() != static_cast<size_t>(iters) || b->rank_time_us.size() != b->time_us.size()) {
        return absl::InternalError(
            absl::StrCat("measurer returned ", b->time_us.size(), " iterations, asked for ", iters));
      }
      if (on_batch) {
        if (absl::Status s = on_batch(p, c.config, *b); !s.ok()) return s;
      }
      c.time_us.insert(c.time_us.end(), b->time_us.begin(), b->time_us.end());
      c.rank_time_us.insert(c.rank_time_us.end(), b->rank_time_us.begin(), b->rank_time_us.end());
      for (double t : b->time_us) c.measured_us += t;
      stats_.iterations += static_cast<uint64_t>(iters);
      c.stat = MedianWithCI(c.time_us);
      const int n = static_cast<int>(c.time_us.size());
      if (n >= options_.min_iters) {
        if (c.stat.rel_half_width() <= options_.target_rel_ci) {
          c.state = CandidateState::kConverged;
        } else if (c.measured_us >= options_.cap_us || n >= options_.max_iters) {
          c.state = CandidateState::kCapped;
        }
      }
      if (c.state != CandidateState::kMeasuring) {
        ++progress_.done;
        progress_.config = &c.config;
        if (on_progress) on_progress(progress_);
      }
    }
    if (options_.exhaustive) continue;
    // Best = the lowest upper bound among candidates with data; prune what is clearly worse than it.
    int best = -1;
    for (size_t i = 0; i < res.candidates.size(); ++i) {
      const auto& c = res.candidates[i];
      if (c.time_us.empty()) continue;
      if (best < 0 || c.stat.hi < res.candidates[static_cast<size_t>(best)].stat.hi) best = static_cast<int>(i);
    }
    for (size_t i = 0; i < res.candidates.size(); ++i) {
      CandidateResult& c = res.candidates[i];
      if (c.state != CandidateState::kMeasuring || static_cast<int>(i) == best ||
          static_cast<int>(i) == res.default_index) {
        continue;
      }
      if (c.stat.lo > res.candidates[static_cast<size_t>(best)].stat.hi * (1 + options_.target_rel_ci)) {
        c.state = CandidateState::kPruned;
        ++stats_.pruned;
        ++progress_.done;
        progress_.config = &c.config;
        if (on_progress) on_progress(progress_);
      }
    }
  }
  stats_.candidates += res.candidates.size();
  // What pruning saved: a pruned candidate would have needed about as many iterations as the finished ones.
  double finished_iters = 0;
  int finished = 0;
  for (const auto& c : res.candidates) {
    stats_.measured_us += c.measured_us;
    if (c.state != CandidateState::kPruned) {
      finished_iters += static_cast<double>(c.time_us.size());
      ++finished;
    }
  }
  const double typical = finished ? finished_iters / finished : 0;
  for (const auto& c : res.candidates) {
    if (c.state != CandidateState::kPruned) continue;
    // Capped candidates stop at cap_us of measuring; assume the same for the pruned one.
    const double more = std::max(0.0, typical - static_cast<double>(c.time_us.size()));
    const double more_capped = std::min(more, std::max(0.0, (options_.cap_us - c.measured_us) / c.stat.median));
    stats_.saved_iterations += more_capped;
    stats_.saved_us += more_capped * c.stat.median;
  }
  // Winner and runner-up by median among the candidates measured to the end; pruned ones rank after them all. A
  // pruned candidate's median is from its first batches only: when the finishers' medians drift upwards later in
  // the point (a noisy, oversubscribed node), that early figure would otherwise win against candidates measured
  // in the same period as the default.
  std::vector<size_t> ranked(res.candidates.size());
  for (size_t i = 0; i < ranked.size(); ++i) ranked[i] = i;
  std::stable_sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    const CandidateResult &ca = res.candidates[a], &cb = res.candidates[b];
    const bool pa = ca.state == CandidateState::kPruned, pb = cb.state == CandidateState::kPruned;
    if (pa != pb) return pb;
    return ca.stat.median < cb.stat.median;
  });
  res.winner = static_cast<int>(ranked[0]);
  res.runner_up = ranked.size() > 1 ? static_cast<int>(ranked[1]) : -1;
  previous_ranking_.clear();
  for (size_t i : ranked) previous_ranking_.push_back(res.candidates[i].config);
  return res;
}

}  // namespace hccltune::sweep

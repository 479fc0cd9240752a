// `hccl-tune simulate`'s computation: for a shape (nodes x ranks per node) and a profile, every valid candidate's
// predicted time per collective and size (powers of two from min to max), fastest first, and where the winner
// changes. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "model/predict.h"
#include "model/profile.h"
#include "runtime/common/types.h"

namespace hccltune::model {

struct SizePrediction {
  uint64_t bytes = 0;
  std::vector<Candidate> ranked;  // fastest first; empty when nothing is valid
};

struct CollectivePrediction {
  Collective collective;
  std::vector<SizePrediction> sizes;
};

// A winner's byte range [from, to] (inclusive sizes of the simulation).
struct WinnerRange {
  std::string algorithm;
  uint64_t from = 0;
  uint64_t to = 0;
};

// REQUIRES: 1 <= min_bytes <= max_bytes.
std::vector<CollectivePrediction> Simulate(const ClusterProfile& profile, const Shape& shape,
                                           absl::Span<const Collective> collectives, uint64_t min_bytes,
                                           uint64_t max_bytes);

// Consecutive sizes with the same winning algorithm merged.
std::vector<WinnerRange> Crossovers(const CollectivePrediction& p);

// The algorithm name of a canonical configuration ("ring(chunk=512K,...)" -> "ring").
std::string AlgorithmOf(const std::string& config);
// The algorithm with the parameters the model tells apart (model/predict.h, RankCandidates): "chain(chunk=64K)",
// "hierarchical(inter=direct,form=leader)" (form only when not auto); other algorithms by name alone.
std::string PricedName(const std::string& config);

}  // namespace hccltune::model

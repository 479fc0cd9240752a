// What a predicted table serves for one call (daemon/predicted_table.h; `hccl-tune get --explain` shows it): the
// model's fastest candidate, unless the built-in default — what `auto` runs without a table (runtime/selector) —
// is predicted within kKeepDefaultMargin of it. Then the default stays: on worlds it never saw the model is off by
// more than such a gain (docs/MODEL.md, "Predicted tables"), and the defaults were chosen from measurements, so a
// prediction only moves a call off them where it expects a clear gain.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "model/predict.h"
#include "model/profile.h"
#include "runtime/common/configuration.h"
#include "runtime/common/types.h"

namespace hccltune::model {

// The default is kept while it is predicted at most this much slower than the fastest candidate.
inline constexpr double kKeepDefaultMargin = 0.25;

struct TableChoice {
  Candidate chosen;           // what the table serves
  Candidate fastest;          // the model's first candidate
  Candidate builtin;          // the built-in default, priced (seconds 0 when the model cannot price it)
  bool kept_default = false;  // chosen is the built-in default although another candidate is predicted faster
};

// The configuration `auto` runs for (c, bytes) on `shape` with no override and no table (node-major ranks).
Configuration BuiltinDefault(Collective c, const Shape& shape, uint64_t bytes);

// `ranked`: RankCandidates(profile, c, shape, bytes), fastest first. REQUIRES: ranked is not empty.
TableChoice ChooseForTable(const ClusterProfile& profile, Collective c, const Shape& shape, uint64_t bytes,
                           const std::vector<Candidate>& ranked);

}  // namespace hccltune::model

// Predicted tables: what hccl-tuned serves for a topology nobody measured, from the cost model stored for the
// topology's class (docs/MODEL.md, "Predicted tables").
//
// For each collective but sendrecv, the model ranks every candidate valid on the topology's shape at the powers of
// two from 8 B to 64 MiB (model/simulate.h) and each size takes its table choice (model/table_choice.h: the fastest,
// or the built-in default where that is predicted within the margin); consecutive sizes with the same choice become
// one entry, the first from 0 bytes, the last unbounded, for every dtype (the model has no dtype term). An entry
// names the model version that predicted it and holds no measurement: samples 0 and rank_time_us 0 (the online
// policy takes its baseline from the first live samples, not from the prediction), time_us the predicted time at
// the entry's first size; there, the runner-up and its predicted margin (where the default was kept: the model's
// fastest, at margin 0) and default_margin, the default's predicted time over the choice's - 1.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "model/predict.h"
#include "model/profile.h"

namespace hccltune::daemon {

// The entries predicted by `profile` (version `model_version` of its class's model) for `shape`.
// FailedPrecondition when the shape spans nodes and the profile never measured a network.
absl::StatusOr<std::vector<db::TunedEntry>> PredictTable(const model::ClusterProfile& profile, int64_t model_version,
                                                         const model::Shape& shape);

}  // namespace hccltune::daemon

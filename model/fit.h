// Fitting a cluster profile (model/profile.h) to measurements: the parameters that make the cost model
// (model/predict.h) closest to what sweeps measured, in relative error.
//
// Writes a version 2 profile (model/profile.h). Inside a node: alpha, o and beta of the node's link, gamma, the
// call, the mailbox exchange and the three waits for a core (per call, round and byte, from the shapes with more
// ranks than `cores_per_node`), from the one-node measurements over shm (link=shm or auto), and with them the
// node's single-copy size (the profile's single_copy_bytes: none, or the measured size that fits them best, each
// tried in turn; only algorithms with a `pulled` cost, such as linear broadcast, tell them apart). Then link=tcp on one
// node: its own alpha, o and beta with the rest fixed (none measured: the profile has no intra_tcp). Between nodes:
// the network's alpha, o, beta and its three waits for a core (inter_oversubscribed; `cores_shared`: the nodes'
// ranks all count against the cores) from the measurements on several nodes, with the node's part fixed at its fit and
// the network taken as the bottleneck (predict.h's max on the network's side). Each is a non-negative problem in at
// most nine unknowns over rows weighted by 1/measured, so every size counts alike, minimising the sum of absolute
// relative errors (iteratively reweighted least squares; each least-squares step solved exactly by trying each
// subset of unknowns held at zero): a few medians far off, such as a rank that lost its core for a scheduler tick,
// do not pull every prediction. Measurements of one (collective, configuration, shape, size) are reduced to their
// median first (Medians: `model check` compares against the same medians).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/predict.h"
#include "model/profile.h"
#include "runtime/common/types.h"

namespace hccltune::model {

struct Measurement {
  Collective collective = Collective::kAllreduce;
  std::string configuration;  // canonical string
  Shape shape;
  uint64_t bytes = 0;
  double seconds = 0;
};

struct FitOptions {
  std::string name = "fitted";
  int nics_per_node = 1;
  int cores_per_node = 0;          // the cores the measured ranks shared (0: not oversubscribed)
  bool cores_shared = false;       // the multi-node sweeps' nodes shared those cores (an emulated cluster on one host)
  int64_t single_copy_bytes = -1;  // the node's single-copy size (profile.h); -1: fitted (FitSingleCopy)
};

struct FitResult {
  ClusterProfile profile;
  size_t intra_points = 0;  // distinct (collective, configuration, shape, size) used: one node over shm
  size_t tcp_points = 0;    // one node over link=tcp
  size_t inter_points = 0;
  size_t skipped = 0;  // measurements of an unknown configuration or a collective without a cost
};

// InvalidArgument when no one-node measurement is usable (the node's link is the base of every prediction).
absl::StatusOr<FitResult> Fit(absl::Span<const Measurement> measurements, const FitOptions& options);

// Reduces repeated measurements to their median (same key as Fit).
std::vector<Measurement> Medians(absl::Span<const Measurement> measurements);

}  // namespace hccltune::model

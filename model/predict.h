// The cost model: the predicted time of a configuration for a collective of `n` bytes on `m` nodes of `l` ranks,
// from the registry's formulas (runtime/algorithms/registry.h, AlgorithmCost: steps, bytes, across) and a cluster
// profile (model/profile.h). With S steps, K messages and B bytes at (p, n, l, m, c), and R(link) = S*alpha + K*o:
//   one node          T = R(intra) + B*beta_intra
//   kOnePerNode       T = R(inter) + B*max(beta_inter, beta_intra)       (one rank per node on the NIC)
//   kEveryRank        T = R(inter) + max(l*f*B*beta_inter/nics, B*beta_intra), f = (p-l)/(p-1) the share of a
//                     rank's bytes that leave its node when it talks to every rank alike
//   kLevels           T = R(intra) + B*beta_intra at m = 1, plus R(inter) + B*beta_inter/nics at l = 1
// plus the reduction, gamma * B * r (r = 1/2 for allreduce, whose bytes are half reduce-scatter, half allgather; 1
// for reducescatter and reduce; 0 otherwise), and, when a node has more busy ranks than cores, everything times
// l/cores. docs/MODEL.md shows the terms with their reasons.
//
// Thread-safety: pure functions of their arguments (the parsed formulas are cached once, immutably).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/profile.h"
#include "runtime/common/types.h"

namespace hccltune::model {

struct Shape {
  int nodes = 1;
  int ranks_per_node = 1;
  int ranks() const { return nodes * ranks_per_node; }
};

// The shape of a topology JSON (runtime/common/fingerprint.h). FailedPrecondition naming why when the model
// predicts nothing for it: uneven ranks per node, a peer runtime's topology, an unreadable JSON.
absl::StatusOr<Shape> PredictableShape(const std::string& topology_json);

struct Candidate {
  std::string config;  // canonical configuration (the algorithm's defaults)
  double seconds = 0;
};

// The coefficients of a prediction: T = factor * (s_intra*alpha_intra + k_intra*o_intra + b_intra*beta_intra +
// s_inter*alpha_inter + k_inter*o_inter + max(b_inter*beta_inter, b_alt*beta_intra) + reduced*gamma). Linear in
// the profile's parameters but for the max (fitting takes the network's side: model/fit.h).
struct Terms {
  double s_intra = 0, k_intra = 0, b_intra = 0;
  double s_inter = 0, k_inter = 0, b_inter = 0;
  double b_alt = 0;    // the same call's bytes at the intra rate, when ranks also send inside the node meanwhile
  double reduced = 0;  // bytes reduced
  double factor = 1;   // l / cores when oversubscribed
};
// NotFound when the registry has no cost for (c, algorithm); `nics` and `cores` from the profile.
absl::StatusOr<Terms> CostTerms(Collective c, const std::string& algorithm, uint64_t chunk, const Shape& shape,
                                uint64_t bytes, int nics, int cores);
double Evaluate(const Terms& t, const ClusterProfile& profile);

// Predicted seconds of `algorithm` (with `chunk`) for collective `c` over `bytes`; NotFound when the registry has
// no cost for it; FailedPrecondition across nodes when the profile's network was never measured.
absl::StatusOr<double> PredictSeconds(const ClusterProfile& profile, Collective c, const std::string& algorithm,
                                      uint64_t chunk, const Shape& shape, uint64_t bytes);

// Every algorithm the registry holds valid for `shape` (its default configuration), fastest first.
std::vector<Candidate> RankCandidates(const ClusterProfile& profile, Collective c, const Shape& shape, uint64_t bytes);

}  // namespace hccltune::model

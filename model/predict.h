// The cost model: the predicted time of a configuration for a collective of `n` bytes on `m` nodes of `l` ranks,
// from the registry's formulas (runtime/algorithms/registry.h, AlgorithmCost: steps, bytes, across, mailbox) and a
// cluster profile (model/profile.h). With S steps, K messages and B bytes at (p, n, l, m, c), and
// R(link) = S*alpha + K*o:
//   one node          T = R(intra) + B*beta_intra  (link=tcp: the profile's intra_tcp link)
//   one node, mailbox T = mailbox + B*beta_intra   (version 2: shm, and the algorithm's mailbox block fits
//                     kMailboxBlockBytes: the call is one exchange, not its steps and messages)
//   one node, pulled  B = the registry's `pulled` (version 2: shm, and it reaches the profile's single_copy_bytes,
//                     doubled when the node's ranks outnumber its cores, as the runtime does: receivers read by
//                     single copy, at once, so a root's sends to every rank cost it nothing)
//   kOnePerNode       T = R(inter) + B*max(beta_inter, beta_intra)       (one rank per node on the NIC)
//   kEveryRank        T = R(inter) + max(l*f*B*beta_inter/nics, B*beta_intra), f = (p-l)/(p-1) the share of a
//                     rank's bytes that leave its node when it talks to every rank alike
//   kDoubling         T = R'(inter) + max(l*B'*beta_inter/nics, B'*beta_intra) + R''(intra) + (B-B')*beta_intra:
//                     S', K', B' the formulas at l = 1 (p = m), the rounds between nodes, in R'; S-S', K-K' in R''
//   kTree             as kDoubling with B'*beta_inter/nics: one rank of a node is in the tree between nodes
//   kLevels           T = R(intra) + B*beta_intra at m = 1, plus R(inter) + B*beta_inter/nics at l = 1 (version 1;
//                     version 2 prices a hierarchical configuration by the steps it configures: ConfigTerms)
// plus the reduction, gamma * B * r (r = 1/2 for allreduce, whose bytes are half reduce-scatter, half allgather; 1
// for reducescatter and reduce; 0 otherwise). Version 2 adds each call's own cost (call) and, when a node has more
// busy ranks than cores, the wait for a core: e*(call' + rounds*round' + B*byte') (rounds: S, or the one exchange;
// B: the average rank's bytes, the registry's `mean` where a rooted algorithm's busiest rank moves more;
// e = (l - cores)/cores, the ranks beyond the cores per core; l counts every node's ranks when `cores_shared`);
// version 1 multiplies everything by l/cores instead. docs/MODEL.md shows the terms with their reasons.
//
// Thread-safety: pure functions of their arguments (the parsed formulas are cached once, immutably).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/profile.h"
#include "runtime/algorithms/algorithm.h"
#include "runtime/common/configuration.h"
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

// The coefficients of a prediction. Version 2: T = calls*call + R + max(b_inter*beta_inter, b_alt*beta_intra) +
// exchanges*mailbox + reduced*gamma + WaitSeconds + InterWaitSeconds (below), with
// R = s_intra*alpha_intra + k_intra*o_intra + b_intra*beta_intra + s_inter*alpha_inter + k_inter*o_inter (intra at
// intra_tcp when `tcp`). Version 1: factor * (R + max(...) + reduced*gamma). Linear in the profile's parameters but
// for the max (fitting takes the network's side: model/fit.h).
struct Terms {
  double s_intra = 0, k_intra = 0, b_intra = 0;
  double s_inter = 0, k_inter = 0, b_inter = 0;
  double b_alt = 0;        // the same call's bytes at the intra rate, when ranks also send inside the node meanwhile
  double reduced = 0;      // bytes reduced
  double calls = 0;        // 1 in version 2: the call's own cost, whatever its algorithm
  double exchanges = 0;    // mailbox exchanges (version 2)
  double excess = 0;       // (busy - cores) / cores when a node has more busy ranks than cores, else 0 (version 2)
  double inter_calls = 0;  // 1 when the call crosses nodes (version 2)
  bool tcp = false;        // one node over link=tcp: the intra terms at the profile's intra_tcp (version 2)
  double factor = 1;       // l / cores when oversubscribed (version 1)
  double b_spared = 0;     // of the bytes, what the average rank does not move (a rooted algorithm's root does)
  double rounds() const { return s_intra + s_inter + exchanges; }
  // The bytes a rank copies while it waits for a core: the average rank's, since the cores copy every rank's.
  double wait_bytes() const { return b_intra + b_alt - b_spared; }
};
// Where a configuration runs, besides its shape: what CostTerms needs of the profile and the configuration.
struct TermContext {
  int nics = 1;
  int cores = 0;                    // 0: never oversubscribed
  int version = kProfileVersion;    // the profile's form
  LinkKind link = LinkKind::kAuto;  // the configuration's link
  bool cores_shared = false;        // the cores serve every node's ranks (an emulated cluster), not one node's
  uint64_t single_copy_bytes = 0;   // the smallest shm message read by single copy at this shape (0: none is)
};
// The smallest shm message read by single copy on a node of `ranks_per_node` ranks, from a profile's
// `single_copy_bytes` (ranks with a core each): twice that when the ranks outnumber `cores` (> 0), as the runtime
// chooses (runtime/transport/shm/cma_cost.h); 0 stays 0.
uint64_t SingleCopyBytesAt(uint64_t dedicated, int ranks_per_node, int cores);
// NotFound when the registry has no cost for (c, algorithm).
absl::StatusOr<Terms> CostTerms(Collective c, const std::string& algorithm, uint64_t chunk, const Shape& shape,
                                uint64_t bytes, const TermContext& where);
// The terms of a configuration at its own link: CostTerms of its algorithm and chunk, except (version 2) a
// hierarchical configuration on several nodes of several ranks, which is the sum of its steps as its algorithm runs
// them (model/levels.cc): each step priced with the configured part (intra or inter) where its algorithm exists for
// the step's collective, else with what the runtime chooses for the step (Selector::ChooseStep); an inter step that
// every local rank runs at once puts l of them on the node's NICs; each step after the first waits to start as a call
// across nodes does (inter_calls); form=leader and form=parallel (auto on these
// uniform nodes) take their own steps. The wait for a core is the whole call's, at `shape`.
absl::StatusOr<Terms> ConfigTerms(Collective c, const Configuration& config, const Shape& shape, uint64_t bytes,
                                  TermContext where);
double Evaluate(const Terms& t, const ClusterProfile& profile);
// Version 2's wait for a core: excess * (call + rounds()*round + wait_bytes()*byte) inside a node (o = the profile's
// oversubscribed), excess * (inter_calls*call + s_inter*round + b_inter*byte) across nodes (its inter_oversubscribed).
double WaitSeconds(const Terms& t, const Oversubscribed& o);
double InterWaitSeconds(const Terms& t, const Oversubscribed& o);

// Predicted seconds of `algorithm` (with `chunk`) for collective `c` over `bytes`; NotFound when the registry has
// no cost for it; FailedPrecondition across nodes when the profile's network was never measured.
// link=tcp on one node: FailedPrecondition when a version 2 profile never measured tcp inside a node.
absl::StatusOr<double> PredictSeconds(const ClusterProfile& profile, Collective c, const std::string& algorithm,
                                      uint64_t chunk, const Shape& shape, uint64_t bytes,
                                      LinkKind link = LinkKind::kAuto);

// The same for a whole configuration (ConfigTerms).
absl::StatusOr<double> PredictSeconds(const ClusterProfile& profile, Collective c, const Configuration& config,
                                      const Shape& shape, uint64_t bytes);

// `shape` as a group whose ranks are numbered node by node (what RankCandidates prices).
GroupTopology NodeMajorTopology(const Shape& shape);

// Every algorithm the registry holds valid for `shape`, fastest first: its default configuration, except for the
// parameters the model tells apart — a chain's chunk (registry::ChunkCandidates) and a hierarchical configuration's
// inter step and form (registry::Candidates, link=auto); channels are not priced, so only the default is listed.
std::vector<Candidate> RankCandidates(const ClusterProfile& profile, Collective c, const Shape& shape, uint64_t bytes);

}  // namespace hccltune::model

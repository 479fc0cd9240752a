// What the hierarchical algorithms (allreduce, allgather, reducescatter, broadcast) share: the group's split into
// levels and the running of one step as a sub-collective.
//
// A step's configuration is the hierarchical configuration's `intra` (inside a node) or `inter` (between nodes)
// part when that algorithm exists for the step's collective; otherwise what the selector chooses for the step
// (AlgorithmContext::ChooseStep: the built-in defaults for that collective, size, group size and node count), on the
// given part's link. Thread-safety: values and functions of their arguments; one call's context at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/algorithms/algorithm.h"

namespace hccltune::algo {

// The group by node, seen from this rank.
struct Levels {
  std::vector<std::vector<int>> nodes;  // group ranks of each node, ascending; nodes in topology order
  int node = 0;                         // this rank's node
  int local = 0;                        // this rank's index inside its node
  bool uniform = true;                  // every node has as many ranks as this one
  const std::vector<int>& mine() const { return nodes[static_cast<size_t>(node)]; }
  // The ranks with local index j on every node that has one, in node order (sub-rank k is on node k when every
  // node has more than j ranks).
  std::vector<int> Cross(int j) const;
  // The first rank of every node, except `root`'s node, which is represented by `root`.
  std::vector<int> Leaders(int root) const;
  // The node of group rank r and its index inside it.
  int NodeOf(int r) const;
  int LocalOf(int r) const;
};

// Whether a hierarchical allgather/reducescatter runs through one leader per node: form=leader, or form=auto on
// uneven nodes (else every local rank in parallel). InvalidArgument for form=parallel on uneven nodes (which
// registry::CheckForm refuses before a call gets here); the same answer on every rank.
absl::StatusOr<bool> LeaderForm(const Configuration& config, const Levels& lv);

// REQUIRES: topology of every group rank (node indices in [0, num_nodes)), `rank` a group rank.
Levels SplitLevels(const GroupTopology& topo, int rank);

// A step's arguments, buffers and count left to set: the call's dtype, and its op with avg as sum (the hierarchical
// algorithm finishes avg itself, internal.h).
CollectiveArgs StepArgs(const CollectiveArgs& args);

// The configuration of a step of collective `c` over `bytes` among `group_size` ranks on `nodes` nodes (1 inside a
// node, `group_size` between nodes; see above).
absl::StatusOr<Configuration> StepConfig(AlgorithmContext& ctx, const std::shared_ptr<const Configuration>& given,
                                         Collective c, uint64_t bytes, size_t group_size, int nodes);

// Runs `sub` as collective `c` among `members` (group ranks; sub-rank i is members[i]) with StepConfig's
// configuration for `bytes`.
absl::Status RunStep(AlgorithmContext& ctx, CollectiveArgs& sub, Collective c,
                     const std::shared_ptr<const Configuration>& given, uint64_t bytes,
                     const std::vector<int>& members);

}  // namespace hccltune::algo

// Hierarchical broadcast: an inter-node step and an intra-node step, each a sub-collective with the configuration's
// `inter` / `intra` part (or the selector's choice for the step, runtime/algorithms/hierarchy.h).
//
//   1. broadcast(inter) of the buffer from the root among one leader per node — the root on its own node, the
//      lowest rank on every other;
//   2. broadcast(intra) of it from each node's leader to the rest of the node.
// The buffer crosses the network once per other node (with a tree or chain inter step, each NIC receives it
// once), and never twice into the same node. Every rank ends with a copy of the root's bytes. Works for any topology
// (uneven nodes included); the registry marks it valid only with >= 2 nodes and a node with >= 2 ranks.
// Scratch: none.
#include <vector>

#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/hierarchy.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status BroadcastHierarchical(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  const GroupTopology& topo = ctx.topology();
  const size_t bytes = args.count * DataTypeSize(args.dtype);
  const int me = ctx.rank();
  if (me == args.root) CopyOut(args, args.recv, args.send, bytes);
  if (topo.node_of.size() == 1 || args.count == 0) return absl::OkStatus();
  const Levels lv = SplitLevels(topo, me);
  const std::vector<int> leaders = lv.Leaders(args.root);
  const int leader = leaders[static_cast<size_t>(lv.node)];
  CollectiveArgs sub = StepArgs(args);
  sub.send = args.recv;
  sub.recv = args.recv;
  sub.count = args.count;
  if (me == leader) {
    sub.root = lv.NodeOf(args.root);
    HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kBroadcast, config.inter, bytes, leaders));
  }
  if (lv.mine().size() == 1) return absl::OkStatus();
  sub.root = lv.LocalOf(leader);
  return RunStep(ctx, sub, Collective::kBroadcast, config.intra, bytes, lv.mine());
}

}  // namespace hccltune::algo

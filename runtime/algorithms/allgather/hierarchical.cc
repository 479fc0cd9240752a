// Hierarchical allgather: an inter-node step and an intra-node step, each a sub-collective with the
// configuration's `inter` / `intra` part (or the selector's choice for the step, runtime/algorithms/hierarchy.h).
//
// form=parallel (form=auto where every node has the same number of ranks L; M nodes), every local rank working in
// parallel over its own connections:
//   1. allgather(inter) of this rank's block among the ranks with the same local index j on every node: block k
//      of the M gathered is node k's rank j; they land in scratch at slot j (M blocks);
//   2. allgather(intra), in place, of the M-block slots inside each node: every rank holds all L x M blocks;
//   3. each block is copied to its rank's place in recv.
//   Each rank sends (M-1) blocks across the network, so a node's NIC sends (M-1)/M of the output, split over its L
//   ranks' connections.
// form=leader (form=auto on uneven nodes, e.g. 2+1; form=parallel is refused there), one leader per node (its
// lowest rank):
//   1. gather(intra) of the node's blocks to its leader;  2. allgatherv(inter) of each node's blocks among the
//   leaders (node k's share is its ranks' blocks);  3. broadcast(intra) of the whole output from the leader;
//   4. each block copied to its rank's place in recv.
//   A leader's NIC sends its node's blocks to every other node once at most (with a ring, (M-1)/M of the output).
// Nothing is reduced, so the output is the inputs' bytes exactly on every rank. Scratch: the output's size (plus
// the node's blocks on a leader). Works for any topology; the registry marks it valid only with >= 2 nodes and a
// node with >= 2 ranks.
#include <vector>

#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/hierarchy.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {
namespace {

// Uneven nodes: gather to the leaders, allgatherv among them, broadcast from them; `all` (scratch, n blocks) ends
// holding every block, node by node.
absl::Status LeaderAllgather(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx,
                             const Levels& lv, char* all) {
  const size_t dsize = DataTypeSize(args.dtype);
  const size_t n = ctx.topology().node_of.size();
  std::vector<size_t> counts, displs;
  size_t offset = 0;
  for (const auto& node : lv.nodes) {
    counts.push_back(node.size() * args.count);
    displs.push_back(offset);
    offset += node.size() * args.count;
  }
  char* mine_in_all = At(all, displs[static_cast<size_t>(lv.node)], dsize);
  CollectiveArgs sub = StepArgs(args);
  sub.send = args.send;
  sub.recv = mine_in_all;  // a leader gathers its node's blocks in place in `all`
  sub.count = args.count;
  sub.root = 0;
  const uint64_t node_bytes = counts[static_cast<size_t>(lv.node)] * dsize;
  HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kGather, config.intra, node_bytes, lv.mine()));
  if (lv.local == 0) {
    sub = StepArgs(args);
    sub.send = mine_in_all;
    sub.recv = all;
    sub.count = counts[static_cast<size_t>(lv.node)];
    sub.counts = counts;
    sub.displs = displs;
    HT_RETURN_IF_ERROR(
        RunStep(ctx, sub, Collective::kAllgatherv, config.inter, n * args.count * dsize, lv.Leaders(lv.nodes[0][0])));
  }
  sub = StepArgs(args);
  sub.send = all;
  sub.recv = all;
  sub.count = n * args.count;
  sub.root = 0;
  return RunStep(ctx, sub, Collective::kBroadcast, config.intra, n * args.count * dsize, lv.mine());
}

}  // namespace

absl::Status AllgatherHierarchical(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  const GroupTopology& topo = ctx.topology();
  const size_t dsize = DataTypeSize(args.dtype);
  const int n = static_cast<int>(topo.node_of.size());
  const int me = ctx.rank();
  const size_t block = args.count * dsize;
  if (n == 1 || args.count == 0) {
    CopyOut(args, At(args.recv, static_cast<size_t>(me) * args.count, dsize), args.send, block);
    return absl::OkStatus();
  }
  const Levels lv = SplitLevels(topo, me);
  const size_t m = lv.nodes.size();
  char* all = static_cast<char*>(ctx.Scratch(static_cast<size_t>(n) * block));
  absl::StatusOr<bool> leaders = LeaderForm(config, lv);
  if (!leaders.ok()) return leaders.status();
  if (*leaders) {
    HT_RETURN_IF_ERROR(LeaderAllgather(args, config, ctx, lv, all));
    size_t slot = 0;
    for (const auto& node : lv.nodes) {
      for (int r : node)
        CopyOut(args, At(args.recv, static_cast<size_t>(r) * args.count, dsize), all + block * slot++, block);
    }
    return absl::OkStatus();
  }
  const size_t l = lv.mine().size();
  char* my_slot = all + static_cast<size_t>(lv.local) * m * block;
  CollectiveArgs sub = StepArgs(args);
  sub.send = args.send;
  sub.recv = my_slot;
  sub.count = args.count;
  HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kAllgather, config.inter, m * block, lv.Cross(lv.local)));
  sub.send = my_slot;
  sub.recv = all;
  sub.count = m * args.count;
  HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kAllgather, config.intra, l * m * block, lv.mine()));
  for (size_t j = 0; j < l; ++j) {
    for (size_t k = 0; k < m; ++k) {
      const int r = lv.nodes[k][j];
      CopyOut(args, At(args.recv, static_cast<size_t>(r) * args.count, dsize), all + (j * m + k) * block, block);
    }
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

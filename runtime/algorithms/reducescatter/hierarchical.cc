// Hierarchical reduce-scatter: an intra-node step and an inter-node step, each a sub-collective with the
// configuration's `intra` / `inter` part (or the selector's choice for the step, runtime/algorithms/hierarchy.h) —
// the mirror of the hierarchical allgather.
//
// form=parallel (form=auto where every node has the same number of ranks L; M nodes), every local rank working in
// parallel over its own connections:
//   1. the input's blocks are copied into scratch grouped by local index: slot j holds the M blocks of the ranks
//      with local index j (node order);
//   2. reducescatter(intra), in place, of the L slots inside each node: local rank j holds slot j summed over the
//      node;
//   3. reducescatter(inter) of that slot among the ranks with local index j on every node: node k's rank j gets
//      block k, reduced over every rank, in recv.
//   Each rank sends (M-1) blocks across the network, so a node's NIC sends (M-1)/M of the input, split over its L
//   ranks' connections.
// form=leader (form=auto on uneven nodes, e.g. 2+1; form=parallel is refused there), one leader per node (its
// lowest rank), with each node's share padded to the largest node's P blocks:
//   1. the input is copied into scratch node by node (node k's ranks' blocks at k x P, padding zero);
//   2. reduce(intra) of it to the node's leader;  3. reducescatter(inter), in place, among the leaders: node k's
//   leader gets its node's share;  4. scatter(intra) of the share's blocks from the leader.
// Sub-steps reduce with sum when the op is avg: fp32/fp64 divide by n once, on the rank that ends with the block;
// fp16/bf16 inputs are scaled by 1/n as they are copied into scratch (internal.h). Each block's value is computed
// once, by one sub-collective, then only copied. Scratch: the input's size (padded when uneven). Works for any
// topology; the registry marks it valid only with >= 2 nodes and a node with >= 2 ranks.
#include <vector>

#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/hierarchy.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {
namespace {

// Uneven nodes: `work` (scratch of nodes x widest x count elements) through reduce, reducescatter among the leaders
// and scatter into recv.
absl::Status LeaderReducescatter(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx,
                                 const Levels& lv, size_t widest, char* work) {
  const size_t dsize = DataTypeSize(args.dtype);
  const int n = static_cast<int>(ctx.topology().node_of.size());
  const size_t share = widest * args.count;  // elements per node
  const size_t m = lv.nodes.size();
  for (size_t k = 0; k < m; ++k) {
    const auto& node = lv.nodes[k];
    for (size_t j = 0; j < widest; ++j) {
      char* dst = At(work, k * share + j * args.count, dsize);
      if (j < node.size()) {
        EnterInput(args, dst, At(args.send, static_cast<size_t>(node[j]) * args.count, dsize), args.count, n);
      } else {
        std::memset(dst, 0, args.count * dsize);
      }
    }
  }
  CollectiveArgs sub = StepArgs(args);
  sub.send = work;
  sub.recv = work;
  sub.count = m * share;
  sub.root = 0;
  HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kReduce, config.intra, m * share * dsize, lv.mine()));
  char* my_share = At(work, static_cast<size_t>(lv.node) * share, dsize);
  if (lv.local == 0) {
    sub.recv = my_share;
    sub.count = share;
    HT_RETURN_IF_ERROR(
        RunStep(ctx, sub, Collective::kReducescatter, config.inter, m * share * dsize, lv.Leaders(lv.nodes[0][0])));
  }
  sub.send = my_share;
  sub.recv = args.recv;
  sub.count = args.count;
  return RunStep(ctx, sub, Collective::kScatter, config.intra, lv.mine().size() * args.count * dsize, lv.mine());
}

}  // namespace

absl::Status ReducescatterHierarchical(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  const GroupTopology& topo = ctx.topology();
  const size_t dsize = DataTypeSize(args.dtype);
  const int n = static_cast<int>(topo.node_of.size());
  const int me = ctx.rank();
  if (n == 1 || args.count == 0) {
    EnterInput(args, args.recv, At(args.send, static_cast<size_t>(me) * args.count, dsize), args.count, n);
    MaybeFinalizeAvg(args, args.recv, args.count, n);
    return absl::OkStatus();
  }
  const Levels lv = SplitLevels(topo, me);
  const size_t m = lv.nodes.size();
  size_t widest = 0;
  for (const auto& node : lv.nodes) widest = std::max(widest, node.size());
  char* work = static_cast<char*>(ctx.Scratch(m * widest * args.count * dsize));
  absl::StatusOr<bool> leaders = LeaderForm(config, lv);
  if (!leaders.ok()) return leaders.status();
  if (*leaders) {
    HT_RETURN_IF_ERROR(LeaderReducescatter(args, config, ctx, lv, widest, work));
    MaybeFinalizeAvg(args, args.recv, args.count, n);
    return absl::OkStatus();
  }
  const size_t l = widest;
  const size_t block = args.count;
  for (size_t j = 0; j < l; ++j) {
    for (size_t k = 0; k < m; ++k) {
      EnterInput(args, At(work, (j * m + k) * block, dsize),
                 At(args.send, static_cast<size_t>(lv.nodes[k][j]) * block, dsize), block, n);
    }
  }
  char* my_slot = At(work, static_cast<size_t>(lv.local) * m * block, dsize);
  CollectiveArgs sub = StepArgs(args);
  sub.send = work;
  sub.recv = my_slot;
  sub.count = m * block;
  HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kReducescatter, config.intra, l * m * block * dsize, lv.mine()));
  sub.send = my_slot;
  sub.recv = args.recv;
  sub.count = block;
  HT_RETURN_IF_ERROR(
      RunStep(ctx, sub, Collective::kReducescatter, config.inter, m * block * dsize, lv.Cross(lv.local)));
  MaybeFinalizeAvg(args, args.recv, args.count, n);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

// Hierarchical allreduce: an intra-node step, an inter-node step and an intra-node step, each run as a
// sub-collective through AlgorithmContext::RunSubCollective with the configuration's `intra` (level0) and
// `inter` (level1) parts — the shape of HCCL's level0/level1 pipeline and UCC's hierarchical allreduce.
//
// Every node has the same number of ranks L (the usual case):
//   1. reducescatter(intra) among the ranks of each node: local rank j gets block j (ceil(count/L) elements;
//      when L does not divide count the input is padded with zeros in scratch and the padding dropped at the
//      end);
//   2. allreduce(inter) of block j among the ranks with local index j on every node (one rank per node);
//   3. allgather(intra) of the blocks inside each node.
//   Inter-node traffic is 1/L of the buffer per rank, spread over all L ranks of a node.
// Otherwise (uneven nodes, e.g. 2+1):
//   1. reduce(intra) to each node's leader (its lowest rank);  2. allreduce(inter) among the leaders;
//   3. broadcast(intra) from the leader.
// Sub-steps reduce with sum when the op is avg. fp32/fp64: the division happens once, after the inter-node step,
// on the value that is then copied to every rank. fp16/bf16: each rank's input is scaled by 1/n (n = all ranks)
// into recv (or the padded scratch) before the first step, which then runs in place (internal.h). Every element's final
// value is computed by one sub-allreduce (bit-identical among its members) and then only copied, so all ranks agree bit
// for bit. The intra configuration is used for every intra-node step; when its algorithm does not exist for a step's
// collective (e.g. intra=ring for reduce/broadcast), that step uses what the selector chooses for it
// (AlgorithmContext::ChooseStep: the built-in defaults for that collective, size and group), on the intra link. Missing
// intra/inter parts mean ring. Works for any topology (one node degenerates to intra steps around a one-rank inter
// step); the registry marks it valid only with >= 2 nodes and a node with
// >= 2 ranks, where it is not pointless.
#include <memory>
#include <vector>

#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/hierarchy.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {
absl::Status AllreduceHierarchical(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  const GroupTopology& topo = ctx.topology();
  const size_t dsize = DataTypeSize(args.dtype);
  const size_t bytes = args.count * dsize;
  const int n = static_cast<int>(topo.node_of.size());
  // The steps run on sub-groups with their own links: this level opens no endpoint itself.
  const int me = ctx.rank();
  if (n == 1 || args.count == 0) {
    CopyBytes(args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  const Levels lv = SplitLevels(topo, me);
  const std::vector<int>& mine = lv.mine();
  const int local = lv.local;

  CollectiveArgs sub = StepArgs(args);

  if (lv.uniform) {
    const size_t L = mine.size();
    const size_t block = CeilDiv(args.count, L);
    const bool padded = block * L != args.count;
    char* base = static_cast<char*>(args.recv);
    if (padded) {
      base = static_cast<char*>(ctx.Scratch(block * L * dsize));
      EnterInput(args, base, args.send, args.count, n);
      std::memset(base + bytes, 0, block * L * dsize - bytes);
    } else if (ScalesInputs(args)) {
      EnterInput(args, base, args.send, args.count, n);
    }
    const bool entered = padded || ScalesInputs(args);  // the input is in base
    char* my_block = At(base, block * static_cast<size_t>(local), dsize);
    const std::vector<int> cross = lv.Cross(local);  // the rank with the same local index on every node

    sub.send = entered ? base : args.send;
    sub.recv = my_block;
    sub.count = block;
    HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kReducescatter, config.intra, bytes, mine));

    sub.send = my_block;
    HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kAllreduce, config.inter, block * dsize, cross));
    MaybeFinalizeAvg(args, my_block, block, n);

    sub.recv = base;
    HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kAllgather, config.intra, block * L * dsize, mine));
    if (padded) CopyBytes(args.recv, base, bytes);
    return absl::OkStatus();
  }

  const std::vector<int> leaders = lv.Leaders(lv.nodes[0][0]);
  sub.count = args.count;
  sub.root = 0;
  sub.send = args.send;
  if (ScalesInputs(args)) {  // reduce in place, on the scaled input
    EnterInput(args, args.recv, args.send, args.count, n);
    sub.send = args.recv;
  }
  sub.recv = args.recv;
  HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kReduce, config.intra, bytes, mine));
  if (local == 0) {
    sub.send = args.recv;
    HT_RETURN_IF_ERROR(RunStep(ctx, sub, Collective::kAllreduce, config.inter, bytes, leaders));
    MaybeFinalizeAvg(args, args.recv, args.count, n);
  }
  sub.send = args.recv;
  return RunStep(ctx, sub, Collective::kBroadcast, config.intra, bytes, mine);
}

}  // namespace hccltune::algo

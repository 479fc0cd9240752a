// Binomial-tree allreduce: a binomial-tree reduce to rank 0 followed by a binomial-tree broadcast from rank 0.
//
// Reduce, rounds d = 1, 2, 4, ...: a rank whose bit d is set sends its partial result to rank r-d and is done;
// otherwise, if r+d < n, it receives r+d's partial result and combines (its own, lower-ranked operand first).
// Rank 0 ends with the full reduction, computed once, and finalises an fp32/fp64 avg (fp16/bf16 avg: each
// rank's input is scaled by 1/n as it is copied into recv, internal.h). Broadcast: the same tree in reverse —
// each rank receives from its parent (r minus its lowest set bit) and forwards to r+d for decreasing d. Works
// for any n (children past n are skipped). Every rank gets a copy of one value: bit-identical.
// Messages: at most ceil(log2 n) per rank per phase; every message is the whole buffer; latency
// 2 ceil(log2 n) x alpha. Scratch: one buffer.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AllreduceBinomialTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  EnterInput(args, args.recv, args.send, args.count, g.size);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();

  void* tmp = ctx.Scratch(bytes);
  const int r = g.rank;
  int d = 1;
  for (; d < g.size; d <<= 1) {
    if (r & d) {
      HT_RETURN_IF_ERROR(g.ep->Send(r - d, args.recv, bytes));
      break;
    }
    if (r + d < g.size) {
      HT_RETURN_IF_ERROR(g.ep->Recv(r + d, tmp, bytes));
      Combine(args, args.recv, args.recv, tmp, args.count);
    }
  }
  if (r == 0) MaybeFinalizeAvg(args, args.recv, args.count, g.size);
  // Broadcast: rank r (r != 0) receives from r - lowbit(r); then sends to r + d for d below its lowbit.
  int top = 1;
  while (top < g.size) top <<= 1;
  int low = top;
  if (r != 0) {
    low = r & -r;
    HT_RETURN_IF_ERROR(g.ep->Recv(r - low, args.recv, bytes));
  }
  for (int e = low >> 1; e >= 1; e >>= 1) {
    if (r + e < g.size) g.ep->Isend(r + e, args.recv, bytes);
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

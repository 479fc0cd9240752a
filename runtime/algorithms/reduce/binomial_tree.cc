// Binomial-tree reduce. With v = (r - root) mod n, in the round with distance d = 1, 2, 4, ... a rank whose bit
// d of v is set sends its partial result to v - d and is done; otherwise, if v + d < n, it receives v + d's
// partial result and combines it after its own (lower v first). The root ends with the full reduction and
// divides an fp32/fp64 avg once (fp16/bf16: every input scaled by 1/n as it is copied into the working buffer).
// ceil(log2 n) rounds (latency-optimal); every message is the whole buffer. Non-root ranks work in scratch and never
// touch recv. Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status ReduceBinomialTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const bool root = g.rank == args.root;
  if (root) EnterInput(args, args.recv, args.send, args.count, g.size);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();
  const int v = Mod(g.rank - args.root, g.size);
  char* scratch = static_cast<char*>(ctx.Scratch(2 * bytes));
  char* tmp = scratch;
  void* work = args.recv;
  if (!root) {
    work = scratch + bytes;
    EnterInput(args, work, args.send, args.count, g.size);
  }
  for (int d = 1; d < g.size; d <<= 1) {
    if (v & d) return g.ep->Send(Mod(v - d + args.root, g.size), work, bytes);
    if (v + d < g.size) {
      HT_RETURN_IF_ERROR(g.ep->Recv(Mod(v + d + args.root, g.size), tmp, bytes));
      Combine(args, work, work, tmp, args.count);
    }
  }
  MaybeFinalizeAvg(args, work, args.count, g.size);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

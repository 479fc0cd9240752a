// Binomial-tree reduce. With v = (r - root) mod n, in the round with distance d = 1, 2, 4, ... a rank whose bit
// d of v is set sends its partial result to v - d and is done; otherwise, if v + d < n, it receives v + d's
// partial result and combines it after its own (lower v first). The root ends with the full reduction and
// divides an fp32/fp64 avg once (fp16/bf16: every input scaled by 1/n as it is copied into the working buffer).
// ceil(log2 n) rounds (latency-optimal); every message is the whole buffer. Non-root ranks work in scratch and never
// touch recv. Any n works. Each partial result is received and reduced into the working buffer (PeerReduce,
// internal.h: straight out of the transport over shm and TCP, staged in scratch over an endpoint that cannot), and
// the input is not copied first: a leaf sends send, and a rank's first reduction reads send as its own operand (an
// fp16/bf16 avg still scales its input into the working buffer first).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status ReduceBinomialTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const bool root = g.rank == args.root;
  if (g.size == 1 || args.count == 0) {
    if (root) EnterInput(args, args.recv, args.send, args.count, g.size);
    return absl::OkStatus();
  }
  const PeerReduce reduce(args, g);
  const int v = Mod(g.rank - args.root, g.size);
  // Scratch: a non-root rank's working buffer, then the staging buffer where the transport cannot reduce.
  const size_t work_bytes = root ? 0 : bytes;
  char* scratch = static_cast<char*>(ctx.Scratch(work_bytes + (reduce.Stages() ? bytes : 0)));
  char* work = root ? static_cast<char*>(args.recv) : scratch;
  char* stage = scratch + work_bytes;
  // This rank's partial result: its input until the first reduction has written `work`.
  const char* cur = static_cast<const char*>(args.send);
  if (ScalesInputs(args)) {
    EnterInput(args, work, args.send, args.count, g.size);
    cur = work;
  }
  for (int d = 1; d < g.size; d <<= 1) {
    if (v & d) return g.ep->Send(Mod(v - d + args.root, g.size), cur, bytes);
    if (v + d < g.size) {
      // This rank's own (lower v) operand first.
      HT_RETURN_IF_ERROR(reduce.From(Mod(v + d + args.root, g.size), work, cur, args.count, stage, false));
      cur = work;
    }
  }
  MaybeFinalizeAvg(args, work, args.count, g.size);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

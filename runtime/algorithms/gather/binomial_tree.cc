// Binomial-tree gather. With v = (r - root) mod n, rank v collects the blocks of its subtree v .. v+size-1
// (contiguous in v order) in scratch: in the round with distance d = 1, 2, 4, ... it receives the subtree of
// v + d (min(d, n-v-d) blocks) while bit d of v is clear, then sends everything it holds to v - lowbit(v).
// The root finally rotates the blocks from v order into rank order. ceil(log2 n) rounds (latency-optimal);
// each rank sends one message; the root receives ceil(log2 n). Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status GatherBinomialTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const bool root = g.rank == args.root;
  if (g.size == 1 || args.count == 0) {
    if (root) CopyOut(args, args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  const int v = Mod(g.rank - args.root, g.size);
  const int subtree = v == 0 ? g.size : std::min(v & -v, g.size - v);
  char* tmp = static_cast<char*>(ctx.Scratch(static_cast<size_t>(subtree) * bytes));
  std::memcpy(tmp, args.send, bytes);
  for (int d = 1; d < g.size; d <<= 1) {
    if (v & d) return g.ep->Send(Mod(v - d + args.root, g.size), tmp, static_cast<size_t>(subtree) * bytes);
    if (v + d < g.size) {
      const size_t child = static_cast<size_t>(std::min(d, g.size - v - d));
      HT_RETURN_IF_ERROR(
          g.ep->Recv(Mod(v + d + args.root, g.size), tmp + static_cast<size_t>(d) * bytes, child * bytes));
    }
  }
  char* out = static_cast<char*>(args.recv);
  for (int j = 0; j < g.size; ++j) {
    CopyOut(args, out + static_cast<size_t>(Mod(j + args.root, g.size)) * bytes, tmp + static_cast<size_t>(j) * bytes,
            bytes);
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

// Binomial-tree broadcast. With v = (r - root) mod n, rank v != 0 receives the buffer from v - lowbit(v) and
// then forwards it to v + d for d = lowbit(v)/2, ..., 1 (the root: for every power of two below n, largest
// first); destinations >= n are skipped, so any n works. ceil(log2 n) rounds (latency-optimal); every message
// is the whole buffer, so the root sends ceil(log2 n) x buffer.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status BroadcastBinomialTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.size == 1 || args.count == 0) {
    if (g.rank == args.root) CopyOut(args, args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  const int v = Mod(g.rank - args.root, g.size);
  int low = 1;
  while (low < g.size) low <<= 1;
  if (v != 0) {
    low = v & -v;
    HT_RETURN_IF_ERROR(g.ep->Recv(Mod(v - low + args.root, g.size), args.recv, bytes));
  }
  // The root sends from its input, so its own copy into `recv` (out of place) overlaps the first transfers
  // instead of delaying them.
  const void* from = v == 0 ? args.send : args.recv;
  for (int d = low >> 1; d >= 1; d >>= 1) {
    if (v + d < g.size) g.ep->Isend(Mod(v + d + args.root, g.size), from, bytes);
  }
  if (v == 0) CopyOut(args, args.recv, args.send, bytes);
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

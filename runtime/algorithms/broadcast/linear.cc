// Linear (flat) broadcast: the root posts its buffer to every other rank at once and each of them receives it
// straight from the root, in one round. The root sends n-1 times the buffer, so it is bandwidth-bound at the
// root; its value is latency at small and mid sizes: one round instead of ceil(log2 n), and with single copy
// every receiver reads the root's buffer itself, concurrently, so the root only waits (Open MPI's
// basic_linear).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status BroadcastLinear(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.size == 1 || args.count == 0) {
    if (g.rank == args.root) CopyOut(args, args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  if (g.rank != args.root) return g.ep->Recv(args.root, args.recv, bytes);
  // Sends first, from the input, so the copy into `recv` (out of place) overlaps the receivers' reads.
  for (int d = 1; d < g.size; ++d) g.ep->Isend(Mod(args.root + d, g.size), args.send, bytes);
  CopyOut(args, args.recv, args.send, bytes);
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

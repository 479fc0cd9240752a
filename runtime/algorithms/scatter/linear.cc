// Linear scatter: the root posts one send per rank (block i to rank i) at once; every other rank receives its
// block straight into recv. One round; the root sends (n-1) blocks. Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status ScatterLinear(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.rank != args.root) {
    if (args.count == 0) return absl::OkStatus();
    return g.ep->Recv(args.root, args.recv, bytes);
  }
  const char* in = static_cast<const char*>(args.send);
  CopyOut(args, args.recv, in + static_cast<size_t>(g.rank) * bytes, bytes);
  if (args.count == 0) return absl::OkStatus();
  for (int i = 0; i < g.size; ++i) {
    if (i != g.rank) g.ep->Isend(i, in + static_cast<size_t>(i) * bytes, bytes);
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

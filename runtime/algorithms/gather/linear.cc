// Linear gather: every non-root rank sends its block to the root; the root posts all n-1 receives at once,
// each straight into place. One round; the root receives (n-1) blocks (its link is the bottleneck), every
// other rank sends one message. Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status GatherLinear(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.rank != args.root) {
    if (args.count == 0) return absl::OkStatus();
    return g.ep->Send(args.root, args.send, bytes);
  }
  char* out = static_cast<char*>(args.recv);
  CopyOut(args, out + static_cast<size_t>(g.rank) * bytes, args.send, bytes);
  if (args.count == 0) return absl::OkStatus();
  for (int i = 0; i < g.size; ++i) {
    if (i != g.rank) g.ep->Irecv(i, out + static_cast<size_t>(i) * bytes, bytes);
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

// Bruck allgather: ceil(log2 n) rounds for any n. Each rank keeps a rotated buffer whose position i holds block
// r+i (mod n). In the round with distance d = 1, 2, 4, ... it sends its first min(d, n-d) blocks to rank r-d
// and receives as many from rank r+d into positions d, d+1, ...; after the last round it holds all n blocks and
// rotates them into place. Latency ceil(log2 n) x alpha (also for non-powers of two, unlike recursive
// doubling's extra fold steps), bytes (n-1)/n x output, plus a local rotation through scratch.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AllgatherBruck(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const size_t n = static_cast<size_t>(g.size);
  char* out = static_cast<char*>(args.recv);
  if (g.size == 1 || args.count == 0) {
    CopyOut(args, out + static_cast<size_t>(g.rank) * bytes, args.send, bytes);
    return absl::OkStatus();
  }
  char* tmp = static_cast<char*>(ctx.Scratch(n * bytes));
  CopyOut(args, tmp, args.send, bytes);
  for (int d = 1; d < g.size; d *= 2) {
    const size_t cnt = static_cast<size_t>(std::min(d, g.size - d));
    HT_RETURN_IF_ERROR(g.ep->SendRecv(Mod(g.rank - d, g.size), tmp, cnt * bytes, Mod(g.rank + d, g.size),
                                      tmp + static_cast<size_t>(d) * bytes, cnt * bytes));
  }
  for (size_t i = 0; i < n; ++i) {
    CopyOut(args, out + static_cast<size_t>(Mod(g.rank + static_cast<int>(i), g.size)) * bytes, tmp + i * bytes, bytes);
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

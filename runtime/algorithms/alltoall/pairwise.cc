// Pairwise-exchange alltoall: n-1 rounds; in round k = 1..n-1 rank r sends its block for rank r+k and
// receives rank r-k's block for it (one SendRecv per round, so at most one message in flight each way). n-1
// messages and (n-1)/n x buffer bytes per rank; latency (n-1) x alpha; no hot spot. Any n works. In place, the
// input is first copied to scratch so blocks are not overwritten before they are sent.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AlltoallPairwise(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const size_t n = static_cast<size_t>(g.size);
  if (args.count == 0) return absl::OkStatus();
  const char* in = static_cast<const char*>(args.send);
  if (args.send == args.recv && g.size > 1) {
    char* copy = static_cast<char*>(ctx.Scratch(n * bytes));
    std::memcpy(copy, args.send, n * bytes);
    in = copy;
  }
  char* out = static_cast<char*>(args.recv);
  const size_t r = static_cast<size_t>(g.rank);
  CopyOut(args, out + r * bytes, in + r * bytes, bytes);
  for (int k = 1; k < g.size; ++k) {
    const int to = Mod(g.rank + k, g.size), from = Mod(g.rank - k, g.size);
    HT_RETURN_IF_ERROR(g.ep->SendRecv(to, in + static_cast<size_t>(to) * bytes, bytes, from,
                                      out + static_cast<size_t>(from) * bytes, bytes));
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

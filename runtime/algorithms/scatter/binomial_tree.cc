// Binomial-tree scatter (the gather tree run backwards). With v = (r - root) mod n, the root lays the blocks
// out in v order in scratch; a rank receives the blocks of its whole subtree (v .. v+size-1, size =
// min(lowbit(v), n-v)) from v - lowbit(v), then hands each child v + d (d = lowbit(v)/2, ..., 1) the part for
// that child's subtree, and keeps block v. ceil(log2 n) rounds; every non-root rank receives one message. Any n
// works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status ScatterBinomialTree(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const bool root = g.rank == args.root;
  if (g.size == 1 || args.count == 0) {
    if (root) CopyOut(args, args.recv, At(args.send, static_cast<size_t>(g.rank) * args.count, g.dsize), bytes);
    return absl::OkStatus();
  }
  const int v = Mod(g.rank - args.root, g.size);
  int top = 1;
  while (top < g.size) top <<= 1;
  const int low = v == 0 ? top : (v & -v);
  const int subtree = v == 0 ? g.size : std::min(low, g.size - v);
  char* tmp = static_cast<char*>(ctx.Scratch(static_cast<size_t>(subtree) * bytes));
  if (root) {
    const char* in = static_cast<const char*>(args.send);
    for (int j = 0; j < g.size; ++j) {
      std::memcpy(tmp + static_cast<size_t>(j) * bytes, in + static_cast<size_t>(Mod(j + args.root, g.size)) * bytes,
                  bytes);
    }
  } else {
    HT_RETURN_IF_ERROR(g.ep->Recv(Mod(v - low + args.root, g.size), tmp, static_cast<size_t>(subtree) * bytes));
  }
  for (int d = low >> 1; d >= 1; d >>= 1) {
    if (v + d < g.size) {
      const size_t child = static_cast<size_t>(std::min(d, g.size - v - d));
      g.ep->Isend(Mod(v + d + args.root, g.size), tmp + static_cast<size_t>(d) * bytes, child * bytes);
    }
  }
  HT_RETURN_IF_ERROR(g.ep->WaitAll());
  CopyOut(args, args.recv, tmp, bytes);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

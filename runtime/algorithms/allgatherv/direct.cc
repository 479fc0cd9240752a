// Direct allgatherv: every rank posts its block (counts[r] elements) to every other rank and receives rank i's
// block into recv at displs[i], all at once. One round, n-1 messages per rank (zero-byte ones for empty
// blocks, so every rank agrees on the pattern). Any n works; all counts zero sends nothing.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AllgathervDirect(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t n = static_cast<size_t>(g.size);
  if (args.counts.size() < n || args.displs.size() < n) {
    return absl::InvalidArgumentError(absl::StrCat("allgatherv needs ", n, " counts and displs"));
  }
  const size_t r = static_cast<size_t>(g.rank);
  char* mine = At(args.recv, args.displs[r], g.dsize);
  CopyOut(args, mine, args.send, args.counts[r] * g.dsize);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += args.counts[i];
  if (g.size == 1 || total == 0) return absl::OkStatus();
  for (int k = 1; k < g.size; ++k) {
    const size_t from = static_cast<size_t>(Mod(g.rank - k, g.size));
    g.ep->Irecv(static_cast<int>(from), At(args.recv, args.displs[from], g.dsize), args.counts[from] * g.dsize);
  }
  for (int k = 1; k < g.size; ++k) g.ep->Isend(Mod(g.rank + k, g.size), mine, args.counts[r] * g.dsize);
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

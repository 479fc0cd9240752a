// Recursive-doubling allgather: log2(p) rounds; in the round with distance d every participant exchanges all
// the blocks it has so far with participant (index xor d), doubling what it holds.
//
// Non-powers of two (fold.h): with p the largest power of two <= n, in the first 2(n-p) ranks each even rank
// sends its block to the odd rank above it, which then holds two adjacent blocks. Participants hold contiguous
// runs of blocks in rank order, so every exchange is one contiguous range each way. At the end the odd ranks
// send the whole result to their even partners. Messages per participant: log2(p) (+1 when folding); bytes:
// (n-1)/n x output; latency log2(p) x alpha.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/fold.h"

namespace hccltune::algo {

absl::Status AllgatherRecursiveDoubling(const CollectiveArgs& args, const Configuration& config,
                                        AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  char* out = static_cast<char*>(args.recv);
  CopyOut(args, out + static_cast<size_t>(g.rank) * bytes, args.send, bytes);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();

  const Fold fold = MakeFold(g.size);
  const int me = fold.Participant(g.rank);
  if (g.rank < 2 * fold.extra) {
    if (me < 0) {
      HT_RETURN_IF_ERROR(g.ep->Send(g.rank + 1, out + static_cast<size_t>(g.rank) * bytes, bytes));
      return g.ep->Recv(g.rank + 1, out, bytes * static_cast<size_t>(g.size));
    }
    HT_RETURN_IF_ERROR(g.ep->Recv(g.rank - 1, out + static_cast<size_t>(g.rank - 1) * bytes, bytes));
  }
  // First rank whose block participant i holds (participants hold [FirstRank(i), FirstRank(i+1))).
  auto first_rank = [&](int i) { return i < fold.extra ? 2 * i : i + fold.extra; };
  for (int d = 1; d < fold.p; d *= 2) {
    const int partner = me ^ d;
    const int mine_lo = me & ~(d - 1), theirs_lo = partner & ~(d - 1);
    const size_t m0 = static_cast<size_t>(first_rank(mine_lo)), m1 = static_cast<size_t>(first_rank(mine_lo + d));
    const size_t t0 = static_cast<size_t>(first_rank(theirs_lo));
    const size_t t1 = static_cast<size_t>(first_rank(theirs_lo + d));
    HT_RETURN_IF_ERROR(g.ep->SendRecv(fold.RankOf(partner), out + m0 * bytes, (m1 - m0) * bytes, fold.RankOf(partner),
                                      out + t0 * bytes, (t1 - t0) * bytes));
  }
  if (g.rank < 2 * fold.extra) return g.ep->Send(g.rank - 1, out, bytes * static_cast<size_t>(g.size));
  return absl::OkStatus();
}

}  // namespace hccltune::algo

// Recursive-halving reduce-scatter: log2(p) rounds; in the round with distance d = p/2, ..., 1 a participant
// splits the range of blocks it is still responsible for in two, sends the half on the partner's side of bit d
// to the partner (index xor d) and reduces the partner's copy of its own half in (lower participant's operand
// first). The data halves every round: (n-1)/n x input bytes, latency log2(p) x alpha.
//
// Non-powers of two (fold.h): with p the largest power of two <= n, each even rank among the first 2(n-p)
// sends its whole input to the odd rank above it, which reduces it in; participants are responsible for
// contiguous runs of ranks' blocks (two for a folded pair, one otherwise), so every split is a contiguous
// range. At the end each odd rank of a folded pair sends its partner's block back. The input is copied into
// scratch as the working buffer — scaled by 1/n for an fp16/bf16 avg, as is the input a folded-out rank hands
// over (internal.h); an fp32/fp64 avg is divided once at the end. Messages per participant: log2(p) (+1).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/fold.h"

namespace hccltune::algo {

absl::Status ReducescatterHalvingDoubling(const CollectiveArgs& args, const Configuration& config,
                                          AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t n = static_cast<size_t>(g.size);
  const size_t bytes = args.count * g.dsize;
  const size_t r = static_cast<size_t>(g.rank);
  if (g.size == 1 || args.count == 0) {
    CopyOut(args, args.recv, At(args.send, r * args.count, g.dsize), bytes);
    return absl::OkStatus();
  }
  const Fold fold = MakeFold(g.size);
  const int me = fold.Participant(g.rank);
  if (me < 0) {  // folded out: hand the input over, get the own block back
    const void* input = args.send;
    if (ScalesInputs(args)) {
      void* scaled = ctx.Scratch(n * bytes);
      EnterInput(args, scaled, args.send, n * args.count, g.size);
      input = scaled;
    }
    HT_RETURN_IF_ERROR(g.ep->Send(g.rank + 1, input, n * bytes));
    HT_RETURN_IF_ERROR(g.ep->Recv(g.rank + 1, args.recv, bytes));
    MaybeFinalizeAvg(args, args.recv, args.count, g.size);
    return absl::OkStatus();
  }
  char* work = static_cast<char*>(ctx.Scratch(2 * n * bytes));
  char* tmp = work + n * bytes;
  EnterInput(args, work, args.send, n * args.count, g.size);
  if (g.rank < 2 * fold.extra) {
    HT_RETURN_IF_ERROR(g.ep->Recv(g.rank - 1, tmp, n * bytes));
    Combine(args, work, tmp, work, n * args.count);
  }
  auto first_rank = [&](int i) { return static_cast<size_t>(i < fold.extra ? 2 * i : i + fold.extra); };
  int lo = 0, width = fold.p;
  for (int d = fold.p / 2; d >= 1; d /= 2) {
    const int partner = me ^ d;
    const int half = width / 2;
    const bool upper = (me & d) != 0;
    const int keep_lo = upper ? lo + half : lo;
    const int send_lo = upper ? lo : lo + half;
    const size_t k0 = first_rank(keep_lo), k1 = first_rank(keep_lo + half);
    const size_t s0 = first_rank(send_lo), s1 = first_rank(send_lo + half);
    HT_RETURN_IF_ERROR(g.ep->SendRecv(fold.RankOf(partner), work + s0 * bytes, (s1 - s0) * bytes, fold.RankOf(partner),
                                      tmp, (k1 - k0) * bytes));
    char* kept = work + k0 * bytes;
    if (partner < me) {
      Combine(args, kept, tmp, kept, (k1 - k0) * args.count);
    } else {
      Combine(args, kept, kept, tmp, (k1 - k0) * args.count);
    }
    lo = keep_lo;
    width = half;
  }
  if (g.rank < 2 * fold.extra) {
    HT_RETURN_IF_ERROR(g.ep->Send(g.rank - 1, work + (r - 1) * bytes, bytes));
  }
  CopyOut(args, args.recv, work + r * bytes, bytes);
  MaybeFinalizeAvg(args, args.recv, args.count, g.size);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

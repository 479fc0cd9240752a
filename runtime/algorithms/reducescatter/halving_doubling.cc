// Recursive-halving reduce-scatter: log2(p) rounds; in the round with distance d = p/2, ..., 1 a participant
// splits the range of blocks it is still responsible for in two, sends the half on the partner's side of bit d
// to the partner (index xor d) and reduces the partner's copy of its own half in (lower participant's operand
// first). The data halves every round: (n-1)/n x input bytes, latency log2(p) x alpha.
//
// Non-powers of two (fold.h): with p the largest power of two <= n, each even rank among the first 2(n-p)
// sends its whole input to the odd rank above it, which reduces it in; participants are responsible for
// contiguous runs of ranks' blocks (two for a folded pair, one otherwise), so every split is a contiguous
// range. At the end each odd rank of a folded pair sends its partner's block back. An fp16/bf16 avg scales the
// input by 1/n into scratch as the working buffer first, as it does the input a folded-out rank hands over
// (internal.h); an fp32/fp64 avg is divided once at the end. Messages per participant: log2(p) (+1).
//
// The last round of a participant that owns one block (every one but the odd rank of a folded pair) reduces it
// straight into recv. Every reduction is a receive-and-reduce into its destination (PeerReduce, internal.h:
// straight out of the transport over shm and TCP, staged in scratch over an endpoint that cannot) and the input is
// not copied first: until the first reduction has written the working buffer (the fold's, or the first round's)
// this rank's operands and what it sends are read from send (an fp16/bf16 avg's scaled copy).
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
  const PeerReduce reduce(args, g);
  const bool folded = g.rank < 2 * fold.extra;
  // Scratch: the working buffer (unless every reduction goes straight into recv: one round, no fold, nothing
  // copied in), then the staging buffer where the transport cannot reduce.
  const bool needs_work = ScalesInputs(args) || folded || fold.p > 2;
  char* work = static_cast<char*>(ctx.Scratch(((needs_work ? 1 : 0) + (reduce.Stages() ? 1 : 0)) * n * bytes));
  char* stage = work + (needs_work ? n * bytes : 0);
  // This rank's current values (all n blocks' worth): send until the first reduction has written `work`.
  const char* src = static_cast<const char*>(args.send);
  if (ScalesInputs(args)) {
    EnterInput(args, work, args.send, n * args.count, g.size);
    src = work;
  }
  if (folded) {
    HT_RETURN_IF_ERROR(reduce.LowerFirst(g.rank - 1, work, src, n * args.count, stage));
    src = work;
  }
  auto first_rank = [&](int i) { return static_cast<size_t>(i < fold.extra ? 2 * i : i + fold.extra); };
  int lo = 0, width = fold.p;
  for (int d = fold.p / 2; d >= 1; d /= 2) {
    const int partner = fold.RankOf(me ^ d);
    const int half = width / 2;
    const bool upper = (me & d) != 0;
    const int keep_lo = upper ? lo + half : lo;
    const int send_lo = upper ? lo : lo + half;
    const size_t k0 = first_rank(keep_lo), k1 = first_rank(keep_lo + half);
    const size_t s0 = first_rank(send_lo), s1 = first_rank(send_lo + half);
    // The last round of a participant owning one block (k1 - k0 == 1, that block r) writes the result itself.
    char* out = d == 1 && !folded ? static_cast<char*>(args.recv) : work + k0 * bytes;
    const OpHandle sent = g.ep->Isend(partner, src + s0 * bytes, (s1 - s0) * bytes);
    HT_RETURN_IF_ERROR(reduce.LowerFirst(partner, out, src + k0 * bytes, (k1 - k0) * args.count, stage));
    HT_RETURN_IF_ERROR(g.ep->Wait(sent));
    src = work;
    lo = keep_lo;
    width = half;
  }
  if (folded) {
    HT_RETURN_IF_ERROR(g.ep->Send(g.rank - 1, work + (r - 1) * bytes, bytes));
    CopyOut(args, args.recv, work + r * bytes, bytes);
  }
  MaybeFinalizeAvg(args, args.recv, args.count, g.size);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

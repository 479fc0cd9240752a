// Halving-doubling allreduce (Rabenseifner): a reduce-scatter by recursive halving followed by an allgather by
// recursive doubling, moving 2(p-1)/p of the buffer per rank in 2 log2(p) rounds.
//
// The buffer is split into p balanced blocks (p = largest power of two <= n; any count works, small counts give
// empty blocks). Reduce-scatter: in the round with distance d = p/2, p/4, ..., 1 a rank keeps the half of its
// current block range on its side of bit d, sends the other half to the partner (index xor d) and reduces the
// partner's copy of the kept half in (lower participant's operand first). After log2(p) rounds participant i
// holds block i fully reduced — each block is computed exactly once, so results are bit-identical everywhere;
// an fp32/fp64 avg is finalised there, once (fp16/bf16: inputs scaled as they are copied in, internal.h). Allgather:
// rounds d = 1, 2, ..., p/2 exchange the ranges held so far. Non-powers of two (fold.h): the first 2(n-p) ranks pair
// up; the even one sends its whole buffer to the odd one, which reduces it in before the rounds and sends the final
// result back after them (2 extra messages). Messages per participating rank: 2 log2(p) (+1 when folding).
//
// Every reduction is a receive-and-reduce into recv (PeerReduce, internal.h: straight out of the transport over
// shm and TCP, no scratch; staged in a buffer of scratch over an endpoint that cannot), and the input is never
// copied first: the first reduction (the fold's, or the first round's) reads this rank's operand from send and
// writes recv, later rounds reduce recv in place, and what a round sends is either the input (first round) or a
// range reduced into recv in an earlier one. An fp16/bf16 avg still scales its input into recv first (internal.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/fold.h"

namespace hccltune::algo {

absl::Status AllreduceHalvingDoubling(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  // Where this rank's operand is read until its first reduction has written recv.
  const char* src = static_cast<const char*>(args.send);
  if (ScalesInputs(args) || g.size == 1 || args.count == 0) {
    EnterInput(args, args.recv, args.send, args.count, g.size);
    src = static_cast<const char*>(args.recv);
  }
  if (g.size == 1 || args.count == 0) return absl::OkStatus();

  const Fold fold = MakeFold(g.size);
  const int me = fold.Participant(g.rank);
  char* buf = static_cast<char*>(args.recv);
  const PeerReduce reduce(args, g);
  char* stage = reduce.Stages() ? static_cast<char*>(ctx.Scratch(bytes)) : nullptr;
  if (g.rank < 2 * fold.extra) {
    if (me < 0) {
      HT_RETURN_IF_ERROR(g.ep->Send(g.rank + 1, src, bytes));
      return g.ep->Recv(g.rank + 1, buf, bytes);
    }
    HT_RETURN_IF_ERROR(reduce.LowerFirst(g.rank - 1, buf, src, args.count, stage));
    src = buf;
  }
  const int p = fold.p;
  auto start = [&](int block) { return BlockStart(args.count, p, block); };
  // Reduce-scatter by recursive halving over blocks [lo, lo + width).
  int lo = 0;
  int width = p;
  for (int d = p / 2; d >= 1; d /= 2) {
    const int partner = fold.RankOf(me ^ d);
    const int half = width / 2;
    const bool upper = (me & d) != 0;
    const int keep_lo = upper ? lo + half : lo;
    const int send_lo = upper ? lo : lo + half;
    const size_t keep_first = start(keep_lo), keep_n = start(keep_lo + half) - keep_first;
    const size_t send_first = start(send_lo), send_n = start(send_lo + half) - send_first;
    // The send goes first so that both partners' messages are on their way before either waits.
    const OpHandle sent = g.ep->Isend(partner, At(src, send_first, g.dsize), send_n * g.dsize);
    HT_RETURN_IF_ERROR(
        reduce.LowerFirst(partner, At(buf, keep_first, g.dsize), At(src, keep_first, g.dsize), keep_n, stage));
    HT_RETURN_IF_ERROR(g.ep->Wait(sent));
    src = buf;
    lo = keep_lo;
    width = half;
  }
  MaybeFinalizeAvg(args, At(buf, start(me), g.dsize), start(me + 1) - start(me), g.size);
  // Allgather by recursive doubling: after the round with distance d this rank holds blocks of its 2d-group.
  for (int d = 1; d < p; d *= 2) {
    const int partner = me ^ d;
    const int mine_lo = me & ~(d - 1);
    const int theirs_lo = partner & ~(d - 1);
    const size_t mine_first = start(mine_lo), mine_n = start(mine_lo + d) - mine_first;
    const size_t theirs_first = start(theirs_lo), theirs_n = start(theirs_lo + d) - theirs_first;
    HT_RETURN_IF_ERROR(g.ep->SendRecv(fold.RankOf(partner), At(buf, mine_first, g.dsize), mine_n * g.dsize,
                                      fold.RankOf(partner), At(buf, theirs_first, g.dsize), theirs_n * g.dsize));
  }
  if (g.rank < 2 * fold.extra) return g.ep->Send(g.rank - 1, buf, bytes);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

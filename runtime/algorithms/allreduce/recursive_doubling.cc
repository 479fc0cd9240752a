// Recursive-doubling allreduce: log2(n) rounds; in round k every rank exchanges its whole (partially reduced)
// buffer with the rank whose index differs in bit k, and both combine the two buffers.
//
// Non-powers of two (fold.h): with p the largest power of two <= n, the first 2(n-p) ranks pair up and the
// even one of each pair sends its buffer to the odd one first (which reduces it in, lower rank first); the p
// remaining ranks run the rounds; at the end each odd rank sends the result back to its even partner.
// Bit-identical results: in every round both partners compute (lower half's value) op (upper half's value) in
// that order, so they compute the same value; an fp32/fp64 avg is divided once at the end (identically on every
// rank), an fp16/bf16 avg scales each input as it is copied into recv (internal.h).
// Messages per participating rank: log2(p) (+1 when folding); bytes: log2(p) x buffer; latency log2(p) x
// alpha — the latency-optimal choice for small buffers. Scratch: one buffer.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/fold.h"

namespace hccltune::algo {

absl::Status AllreduceRecursiveDoubling(const CollectiveArgs& args, const Configuration& config,
                                        AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  EnterInput(args, args.recv, args.send, args.count, g.size);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();

  void* tmp = ctx.Scratch(bytes);
  const Fold fold = MakeFold(g.size);
  const int me = fold.Participant(g.rank);
  if (g.rank < 2 * fold.extra) {
    if (me < 0) {
      HT_RETURN_IF_ERROR(g.ep->Send(g.rank + 1, args.recv, bytes));
    } else {
      HT_RETURN_IF_ERROR(g.ep->Recv(g.rank - 1, tmp, bytes));
      Combine(args, args.recv, tmp, args.recv, args.count);
    }
  }
  if (me >= 0) {
    for (int mask = 1; mask < fold.p; mask <<= 1) {
      const int partner = me ^ mask;
      HT_RETURN_IF_ERROR(g.ep->SendRecv(fold.RankOf(partner), args.recv, bytes, fold.RankOf(partner), tmp, bytes));
      if (partner < me) {
        Combine(args, args.recv, tmp, args.recv, args.count);
      } else {
        Combine(args, args.recv, args.recv, tmp, args.count);
      }
    }
    MaybeFinalizeAvg(args, args.recv, args.count, g.size);
  }
  if (g.rank < 2 * fold.extra) {
    if (me < 0) return g.ep->Recv(g.rank + 1, args.recv, bytes);
    return g.ep->Send(g.rank - 1, args.recv, bytes);
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

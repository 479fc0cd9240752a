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
//
// Each round is a send of the current value and a receive-and-reduce of the partner's into the other of two
// buffers (recv and the scratch), alternating so that the last round writes recv (PeerReduce, internal.h:
// straight out of the transport over shm and TCP, staged in a second scratch buffer over an endpoint that
// cannot). Out of place the input is not copied either (the first round sends send and reads it as this rank's
// operand). A round cannot reduce into the buffer it is sending, hence the two; when the value starts in recv (in
// place, an fp16/bf16 avg's scaled input, a folded pair's sum) and the rounds are odd in number, one copy at the
// end.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/fold.h"

namespace hccltune::algo {

absl::Status AllreduceRecursiveDoubling(const CollectiveArgs& args, const Configuration& config,
                                        AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  char* const recv = static_cast<char*>(args.recv);
  // This rank's current value: send until the first reduction has written one of the two buffers.
  const char* cur = static_cast<const char*>(args.send);
  if (ScalesInputs(args) || g.size == 1 || args.count == 0) {
    EnterInput(args, recv, args.send, args.count, g.size);
    cur = recv;
  }
  if (g.size == 1 || args.count == 0) return absl::OkStatus();

  const PeerReduce reduce(args, g);
  // Scratch: the second buffer, requested where a round writes it, and after it the staging buffer where the
  // transport cannot reduce (then requested at once).
  char* stage = reduce.Stages() ? static_cast<char*>(ctx.Scratch(2 * bytes)) + bytes : nullptr;
  char* tmp = stage == nullptr ? nullptr : stage - bytes;
  auto scratch = [&] {
    if (tmp == nullptr) tmp = static_cast<char*>(ctx.Scratch(bytes));
    return tmp;
  };
  const Fold fold = MakeFold(g.size);
  const int me = fold.Participant(g.rank);
  if (g.rank < 2 * fold.extra) {
    if (me < 0) {
      HT_RETURN_IF_ERROR(g.ep->Send(g.rank + 1, cur, bytes));
      return g.ep->Recv(g.rank + 1, recv, bytes);
    }
    HT_RETURN_IF_ERROR(reduce.LowerFirst(g.rank - 1, recv, cur, args.count, stage));
    cur = recv;
  }
  if (me >= 0) {
    const int rounds = CeilLog2(fold.p);
    // Round i writes recv when as many rounds follow it as keep the alternation ending in recv.
    const bool starts_in_recv = cur == recv;
    for (int i = 0; i < rounds; ++i) {
      const int partner = fold.RankOf(me ^ (1 << i));
      const bool to_recv = starts_in_recv ? (i % 2 == 1) : ((rounds - 1 - i) % 2 == 0);
      char* out = to_recv ? recv : scratch();
      const OpHandle sent = g.ep->Isend(partner, cur, bytes);
      HT_RETURN_IF_ERROR(reduce.LowerFirst(partner, out, cur, args.count, stage));
      HT_RETURN_IF_ERROR(g.ep->Wait(sent));
      cur = out;
    }
    CopyOut(args, recv, cur, bytes);
    MaybeFinalizeAvg(args, recv, args.count, g.size);
  }
  if (g.rank < 2 * fold.extra) {
    if (me < 0) return g.ep->Recv(g.rank + 1, recv, bytes);
    return g.ep->Send(g.rank - 1, recv, bytes);
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

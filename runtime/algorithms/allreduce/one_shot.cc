// One-shot allreduce: every rank sends its whole buffer to every other rank (n-1 messages) and receives the
// n-1 others, then reduces all n inputs locally in rank order 0, 1, ..., n-1. Every rank evaluates the same
// expression in the same order, so results are bit-identical; avg divides the sum once (fp32/fp64) or sums the
// inputs scaled by 1/n in fp32 (fp16/bf16: CombineAll, internal.h).
//
// One round: latency alpha (the fewest message rounds of any algorithm), but (n-1) x buffer bytes per rank
// and n-1 buffers of scratch, so it only pays for small buffers. Any n works.
//
// When the endpoint has a mailbox (the whole communicator on one node over shm) and the buffer fits a slot,
// the n-1 messages become one exchange: each rank writes its input once into its mailbox slot and reduces
// straight out of the other ranks' slots (no ring frames, no copies into scratch).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AllreduceOneShotExchange(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size,
                                      const void** blocks) {
  (void)rank;
  HT_RETURN_IF_ERROR(ep.Exchange(args.send, args.count * DataTypeSize(args.dtype), blocks));
  CombineAll(args, args.recv, blocks, size, args.count);
  return absl::OkStatus();
}

absl::Status AllreduceOneShot(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.size == 1 || args.count == 0) {
    CopyBytes(args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  if (g.caps.mailbox != nullptr && bytes <= g.caps.mailbox->ExchangeCapacity()) {
    // One node, shm: every input is read where its rank wrote it, in the mailbox (runtime/transport/mailbox.h);
    // this rank's own is a copy there, so in place needs nothing more.
    auto* blocks = static_cast<const void**>(ctx.Scratch(static_cast<size_t>(g.size) * sizeof(void*)));
    return AllreduceOneShotExchange(args, *g.caps.mailbox, g.rank, g.size, blocks);
  }
  // Slot i holds rank i's input; this rank's own slot is a copy only in place (recv is overwritten below). After
  // the slots: the n input pointers for CombineAll.
  const size_t n = static_cast<size_t>(g.size);
  const size_t slot_bytes = CeilDiv(bytes * n, size_t{64}) * 64;
  char* slots = static_cast<char*>(ctx.Scratch(slot_bytes + n * sizeof(void*)));
  auto input = [&](int i) -> const void* {
    if (i == g.rank && args.send != args.recv) return args.send;
    return slots + static_cast<size_t>(i) * bytes;
  };
  if (args.send == args.recv) CopyBytes(slots + static_cast<size_t>(g.rank) * bytes, args.send, bytes);
  for (int k = 1; k < g.size; ++k) {
    const int from = Mod(g.rank - k, g.size);
    g.ep->Irecv(from, slots + static_cast<size_t>(from) * bytes, bytes);
  }
  for (int k = 1; k < g.size; ++k) g.ep->Isend(Mod(g.rank + k, g.size), args.send, bytes);
  HT_RETURN_IF_ERROR(g.ep->WaitAll());
  auto* inputs = reinterpret_cast<const void**>(slots + slot_bytes);
  for (int i = 0; i < g.size; ++i) inputs[i] = input(i);
  CombineAll(args, args.recv, inputs, g.size, args.count);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

// Direct allgather: every rank posts its block to every other rank and receives every other block straight
// into place, all at once. One round (latency alpha), n-1 messages and (n-1)/n x output bytes per rank; many
// simultaneous messages, so best for small blocks or fully connected fabrics. Any n works. When the endpoint has
// a mailbox (the whole communicator on one node over shm) and a block fits a slot, the messages become one
// mailbox exchange (runtime/transport/mailbox.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AllgatherDirectExchange(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size,
                                     const void** blocks) {
  const size_t dsize = DataTypeSize(args.dtype);
  const size_t bytes = args.count * dsize;
  HT_RETURN_IF_ERROR(ep.Exchange(args.send, bytes, blocks));
  for (int q = 0; q < size; ++q) {
    CopyOut(args, At(args.recv, static_cast<size_t>(q) * args.count, dsize), q == rank ? args.send : blocks[q], bytes);
  }
  return absl::OkStatus();
}

absl::Status AllgatherDirect(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  char* mine = At(args.recv, static_cast<size_t>(g.rank) * args.count, g.dsize);
  if (g.size == 1 || args.count == 0) {
    CopyOut(args, mine, args.send, bytes);
    return absl::OkStatus();
  }
  if (g.caps.mailbox != nullptr && bytes <= g.caps.mailbox->ExchangeCapacity()) {
    // One node, shm: one mailbox exchange, every block copied into place from where its rank wrote it.
    auto* blocks = static_cast<const void**>(ctx.Scratch(static_cast<size_t>(g.size) * sizeof(void*)));
    return AllgatherDirectExchange(args, *g.caps.mailbox, g.rank, g.size, blocks);
  }
  for (int k = 1; k < g.size; ++k) {
    const int from = Mod(g.rank - k, g.size);
    g.ep->Irecv(from, At(args.recv, static_cast<size_t>(from) * args.count, g.dsize), bytes);
  }
  // Sent from `send`, so this rank's own copy into place overlaps the transfers (peers reading `send` by
  // single copy, or the first ring pieces) instead of delaying them.
  for (int k = 1; k < g.size; ++k) g.ep->Isend(Mod(g.rank + k, g.size), args.send, bytes);
  CopyOut(args, mine, args.send, bytes);
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

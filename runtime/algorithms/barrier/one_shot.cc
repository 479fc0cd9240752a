// One-shot barrier: every rank tells every other rank it has arrived, then waits to hear from all of them —
// one round (the dissemination barrier needs ceil(log2 n)), n-1 zero-byte messages per rank. When the endpoint
// has a mailbox (the whole communicator on one node over shm) it is one empty mailbox exchange instead: each rank
// publishes one word and reads the others' (runtime/transport/mailbox.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status BarrierOneShotExchange(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size,
                                    const void** blocks) {
  (void)args, (void)rank, (void)size;
  return ep.Exchange(nullptr, 0, blocks);
}

absl::Status BarrierOneShot(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  if (g.size == 1) return absl::OkStatus();
  if (g.caps.mailbox != nullptr && g.caps.mailbox->ExchangeCapacity() > 0) {
    auto* blocks = static_cast<const void**>(ctx.Scratch(static_cast<size_t>(g.size) * sizeof(void*)));
    return BarrierOneShotExchange(args, *g.caps.mailbox, g.rank, g.size, blocks);
  }
  for (int k = 1; k < g.size; ++k) g.ep->Irecv(Mod(g.rank - k, g.size), nullptr, 0);
  for (int k = 1; k < g.size; ++k) g.ep->Isend(Mod(g.rank + k, g.size), nullptr, 0);
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

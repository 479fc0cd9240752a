// Direct alltoall: every rank posts block q of its input to rank q and receives rank q's block for it straight
// into place, all n-1 messages each way at once. One round (latency alpha) instead of pairwise's n-1 or Bruck's
// ceil(log2 n), each block sent once; many simultaneous messages, so best for small blocks or fully connected
// fabrics. Any n works. In place, the input is first copied to scratch (the receives overwrite it). When the
// endpoint has a mailbox (the whole communicator on one node over shm) and the whole input fits a slot, the
// messages become one mailbox exchange (runtime/transport/mailbox.h): each rank publishes its input and copies
// its own block out of every rank's slot.
#include <cstring>

#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AlltoallDirectExchange(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size,
                                    const void** blocks) {
  const size_t dsize = DataTypeSize(args.dtype);
  const size_t bytes = args.count * dsize;
  const size_t n = static_cast<size_t>(size);
  const size_t r = static_cast<size_t>(rank);
  HT_RETURN_IF_ERROR(ep.Exchange(args.send, bytes * n, blocks));
  // The slots hold copies of every input, this rank's own included, so in place the output may overwrite it.
  for (size_t q = 0; q < n; ++q) {
    if (q == r && args.send == args.recv) continue;
    CopyOut(args, At(args.recv, q * args.count, dsize), At(blocks[q], r * args.count, dsize), bytes);
  }
  return absl::OkStatus();
}

absl::Status AlltoallDirect(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const size_t n = static_cast<size_t>(g.size);
  const size_t r = static_cast<size_t>(g.rank);
  if (args.count == 0) return absl::OkStatus();
  if (g.size == 1) {
    if (args.send != args.recv) CopyOut(args, args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  if (g.caps.mailbox != nullptr && bytes * n <= g.caps.mailbox->ExchangeCapacity()) {
    auto* blocks = static_cast<const void**>(ctx.Scratch(n * sizeof(void*)));
    return AlltoallDirectExchange(args, *g.caps.mailbox, g.rank, g.size, blocks);
  }
  const char* in = static_cast<const char*>(args.send);
  if (args.send == args.recv) {
    char* copy = static_cast<char*>(ctx.Scratch(n * bytes));
    std::memcpy(copy, args.send, n * bytes);
    in = copy;
  }
  char* out = static_cast<char*>(args.recv);
  for (int k = 1; k < g.size; ++k) {
    const size_t from = static_cast<size_t>(Mod(g.rank - k, g.size));
    g.ep->Irecv(static_cast<int>(from), out + from * bytes, bytes);
  }
  for (int k = 1; k < g.size; ++k) {
    const size_t to = static_cast<size_t>(Mod(g.rank + k, g.size));
    g.ep->Isend(static_cast<int>(to), in + to * bytes, bytes);
  }
  if (args.send != args.recv) CopyOut(args, out + r * bytes, in + r * bytes, bytes);
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

// Direct reduce-scatter: every rank sends block i of its input to rank i (n-1 messages, all posted at once)
// and receives its own block from every rank into scratch, then reduces the n contributions in rank order
// 0..n-1 (a fixed order, independent of arrival; avg finished by CombineAll, internal.h). One round (latency alpha);
// (n-1)/n x input bytes per rank; n-1 blocks of scratch. Any n works. When the endpoint has a mailbox (the whole
// communicator on one node over shm) and the whole input fits a slot, the messages become one mailbox exchange
// (runtime/transport/mailbox.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status ReducescatterDirectExchange(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size,
                                         const void** blocks) {
  const size_t dsize = DataTypeSize(args.dtype);
  const size_t n = static_cast<size_t>(size);
  HT_RETURN_IF_ERROR(ep.Exchange(args.send, args.count * dsize * n, blocks));
  for (size_t i = 0; i < n; ++i) blocks[i] = At(blocks[i], static_cast<size_t>(rank) * args.count, dsize);
  CombineAll(args, args.recv, blocks, size, args.count);
  return absl::OkStatus();
}

absl::Status ReducescatterDirect(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const size_t r = static_cast<size_t>(g.rank);
  const char* own = At(args.send, r * args.count, g.dsize);
  if (g.size == 1 || args.count == 0) {
    CopyOut(args, args.recv, own, bytes);
    return absl::OkStatus();
  }
  if (g.caps.mailbox != nullptr && bytes * static_cast<size_t>(g.size) <= g.caps.mailbox->ExchangeCapacity()) {
    // One node, shm: each rank publishes its whole input in one mailbox exchange and reduces its own block
    // straight out of every rank's slot (its own included: a copy, so in place needs nothing more).
    auto* blocks = static_cast<const void**>(ctx.Scratch(static_cast<size_t>(g.size) * sizeof(void*)));
    return ReducescatterDirectExchange(args, *g.caps.mailbox, g.rank, g.size, blocks);
  }
  const size_t slot_bytes = CeilDiv(bytes * static_cast<size_t>(g.size), size_t{64}) * 64;
  char* slots = static_cast<char*>(ctx.Scratch(slot_bytes + static_cast<size_t>(g.size) * sizeof(void*)));
  const bool in_place = static_cast<const void*>(own) == args.recv;
  if (in_place) std::memcpy(slots + r * bytes, own, bytes);
  auto input = [&](int i) -> const void* {
    if (i == g.rank && !in_place) return own;
    return slots + static_cast<size_t>(i) * bytes;
  };
  for (int k = 1; k < g.size; ++k) {
    const int from = Mod(g.rank - k, g.size);
    g.ep->Irecv(from, slots + static_cast<size_t>(from) * bytes, bytes);
  }
  for (int k = 1; k < g.size; ++k) {
    const int to = Mod(g.rank + k, g.size);
    g.ep->Isend(to, At(args.send, static_cast<size_t>(to) * args.count, g.dsize), bytes);
  }
  HT_RETURN_IF_ERROR(g.ep->WaitAll());
  auto* inputs = reinterpret_cast<const void**>(slots + slot_bytes);
  for (int i = 0; i < g.size; ++i) inputs[i] = input(i);
  CombineAll(args, args.recv, inputs, g.size, args.count);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

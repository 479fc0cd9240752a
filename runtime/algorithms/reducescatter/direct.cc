// Direct reduce-scatter: every rank sends block i of its input to rank i (n-1 messages, all posted at once)
// and receives its own block from every rank into scratch, then reduces the n contributions in rank order
// 0..n-1 (a fixed order, independent of arrival). One round (latency alpha); (n-1)/n x input bytes per rank;
// n-1 blocks of scratch. Any n works. When the endpoint has a mailbox (the whole communicator on one node over
// shm) and the whole input fits a slot, the messages become one mailbox exchange (runtime/transport/mailbox.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

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
  if (bytes * static_cast<size_t>(g.size) <= g.ep->ExchangeCapacity()) {
    // One node, shm: each rank publishes its whole input in one mailbox exchange and reduces its own block
    // straight out of every rank's slot (its own included: a copy, so in place needs nothing more).
    auto* blocks = static_cast<const void**>(ctx.Scratch(static_cast<size_t>(g.size) * sizeof(void*)));
    HT_RETURN_IF_ERROR(g.ep->Exchange(args.send, bytes * static_cast<size_t>(g.size), blocks));
    auto input = [&](int i) { return At(blocks[i], r * args.count, g.dsize); };
    Combine(args, args.recv, input(0), input(1), args.count);
    for (int i = 2; i < g.size; ++i) Combine(args, args.recv, args.recv, input(i), args.count);
    MaybeFinalizeAvg(args, args.recv, args.count, g.size);
    return absl::OkStatus();
  }
  char* slots = static_cast<char*>(ctx.Scratch(bytes * static_cast<size_t>(g.size)));
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
  Combine(args, args.recv, input(0), input(1), args.count);
  for (int i = 2; i < g.size; ++i) Combine(args, args.recv, args.recv, input(i), args.count);
  MaybeFinalizeAvg(args, args.recv, args.count, g.size);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

// Symmetric broadcast: for receive buffers in symmetric memory (Communicator::AllocSymmetric). The root first
// copies its send buffer into its own recv (nothing to do in place, MPI_Bcast's case). After the entry round
// (runtime/algorithms/symmetric_call.h) the copying is shared by every rank, root included: the message is cut
// into n cache-line-aligned slices and rank k copies slice k of the root's recv, as mapped here, into the recv of
// every other rank — each slice read once, no rank idle (with 2 ranks the root writes half of the receiver's
// buffer while the receiver reads the other half). No page pinning, unlike process_vm_readv, so ranks that
// copy at once do not queue on the root's page-table lock. Then the exit round (the root returns once every
// slice is in place everywhere).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"
#include "runtime/algorithms/symmetric_call.h"

namespace hccltune::algo {

absl::Status BroadcastSymmetric(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.rank == args.root) CopyBytes(args.recv, args.send, bytes);
  if (g.size == 1 || bytes == 0) return absl::OkStatus();
  void* scratch = ctx.Scratch(SymmetricCall::ScratchBytes(g.size));
  auto call = SymmetricCall::Enter(g, ctx, args, nullptr, 0, args.recv, bytes, scratch);
  if (!call.ok()) return call.status();
  size_t begin = 0, end = 0;
  SymmetricSlice(args.count, g.dsize, g.size, g.rank, &begin, &end);
  const size_t off = begin * g.dsize, n = (end - begin) * g.dsize;
  const bool streaming = args.stream.bytes > 0;
  for (int k = 0; k < g.size && n > 0; ++k) {
    const int q = (g.rank + k) % g.size;  // own buffer first
    if (q == args.root) continue;
    if (streaming) {
      CopyStreaming(call->recv(q) + off, call->recv(args.root) + off, n);
    } else {
      std::memcpy(call->recv(q) + off, call->recv(args.root) + off, n);
    }
  }
  return call->Leave();
}

}  // namespace hccltune::algo

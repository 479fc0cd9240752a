// Symmetric broadcast: for receive buffers in symmetric memory (Communicator::AllocSymmetric). The root first
// copies its send buffer into its own recv (nothing to do in place, MPI_Bcast's case); after the entry round
// (runtime/algorithms/symmetric_call.h) every other rank copies the root's recv, as mapped here, into its own:
// one memcpy per receiver, and — unlike process_vm_readv — no page pinning, so receivers that read at once do not
// queue on the root's page-table lock; then the exit round (the root returns once everyone has read).
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
  if (g.rank != args.root) CopyOut(args, args.recv, call->recv(args.root), bytes);
  return call->Leave();
}

}  // namespace hccltune::algo

// Symmetric allgather: for buffers in symmetric memory (Communicator::AllocSymmetric). After the entry round
// (runtime/algorithms/symmetric_call.h) every rank copies every rank's block straight from that rank's send
// buffer, as mapped here, into its own output — one memcpy per block, no ring, no kernel copy (against a ring's
// two copies or process_vm_readv's page pinning) — starting with the next rank's so that ranks do not all read
// one buffer at once; then the exit round. Outputs in the call's stream region are written with non-temporal
// stores. In place (send = this rank's block of recv) its own block is already there, and a rank never writes a
// block that another rank reads from it.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"
#include "runtime/algorithms/symmetric_call.h"

namespace hccltune::algo {

absl::Status AllgatherSymmetric(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t block = args.count * g.dsize;
  if (g.size == 1 || block == 0) {
    CopyBytes(args.recv, args.send, block);
    return absl::OkStatus();
  }
  void* scratch = ctx.Scratch(SymmetricCall::ScratchBytes(g.size));
  auto call =
      SymmetricCall::Enter(g, ctx, args, args.send, block, args.recv, block * static_cast<size_t>(g.size), scratch);
  if (!call.ok()) return call.status();
  for (int k = 1; k <= g.size; ++k) {
    const int q = (g.rank + k) % g.size;  // own block last
    CopyOut(args, At(args.recv, static_cast<size_t>(q) * args.count, g.dsize), call->send(q), block);
  }
  return call->Leave();
}

}  // namespace hccltune::algo

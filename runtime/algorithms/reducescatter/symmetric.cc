// Symmetric reduce-scatter: for buffers in symmetric memory (Communicator::AllocSymmetric). After the entry round
// (runtime/algorithms/symmetric_call.h) rank r reduces block r of every rank's send buffer, as mapped here, in
// rank order 0, 1, ..., n-1, straight into its own output (SymmetricReduce: fused for fp32 sum/prod/min/max,
// tiled otherwise, avg finished on the tile); then the exit round. Each input byte is read once by the one rank that
// needs it, and nothing is sent. In place (recv = block r of send) rank r alone reads and writes block r.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"
#include "runtime/algorithms/symmetric_call.h"

namespace hccltune::algo {

absl::Status ReducescatterSymmetric(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t block = args.count * g.dsize;
  if (g.size == 1 || block == 0) {
    CopyBytes(args.recv, At(args.send, static_cast<size_t>(g.rank) * args.count, g.dsize), block);
    return absl::OkStatus();
  }
  const size_t n = static_cast<size_t>(g.size);
  char* scratch =
      static_cast<char*>(ctx.Scratch(SymmetricCall::ScratchBytes(g.size) + kSymmetricTileBytes + n * sizeof(void*)));
  auto call = SymmetricCall::Enter(g, ctx, args, args.send, block * n, args.recv, block, scratch);
  if (!call.ok()) return call.status();
  char* tile = scratch + SymmetricCall::ScratchBytes(g.size);
  auto* inputs = reinterpret_cast<const void**>(tile + kSymmetricTileBytes);
  for (int q = 0; q < g.size; ++q) inputs[q] = call->send(q) + static_cast<size_t>(g.rank) * block;
  void* out = args.recv;
  SymmetricReduce(args, inputs, g.size, &out, 1, args.count, tile);
  return call->Leave();
}

}  // namespace hccltune::algo

// Symmetric allreduce: for buffers in symmetric memory (Communicator::AllocSymmetric), where every rank has
// every other rank's input and output mapped. No data message at all (runtime/algorithms/symmetric_call.h):
//   1. the entry round: every rank learns where every rank's send and recv buffers are;
//   2. the count is cut into n cache-line-aligned slices; rank r reduces slice r of all n inputs, in rank order
//      0, 1, ..., n-1, and writes the result into slice r of all n outputs — in one fused pass where a kernel
//      exists (ReduceFanout: fp32 sum/prod/min/max), else through a tile in L1 (avg finished on the tile) —
//      with non-temporal stores for a call in the communicator's stream region;
//   3. the exit round: nobody returns before every rank has finished reading and writing.
// Each value is computed once and copied to every rank, so results are bit-identical. In place is safe: slice
// r of every buffer is read and written only by rank r, each element (or tile) read in full before it is written.
//
// Per rank the memory traffic is what the bound counts (its slice of n inputs read once, n outputs written
// once) — against the ring's extra copy of every byte through a shared ring — and both of step 2's streams run
// on every core at once. Cost: two message rounds of n-1 tiny messages, so small calls stay with the other
// algorithms (the communicator picks this one for `auto` from SymmetricFromBytes, runtime/api/communicator.h).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"
#include "runtime/algorithms/symmetric_call.h"

namespace hccltune::algo {

absl::Status AllreduceSymmetric(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  if (g.size == 1 || bytes == 0) {
    CopyBytes(args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  const size_t n = static_cast<size_t>(g.size);
  char* scratch = static_cast<char*>(
      ctx.Scratch(SymmetricCall::ScratchBytes(g.size) + kSymmetricTileBytes + 2 * n * sizeof(void*)));
  auto call = SymmetricCall::Enter(g, ctx, args, args.send, bytes, args.recv, bytes, scratch);
  if (!call.ok()) return call.status();
  char* tile = scratch + SymmetricCall::ScratchBytes(g.size);
  auto* inputs = reinterpret_cast<const void**>(tile + kSymmetricTileBytes);
  auto* outputs = reinterpret_cast<void**>(tile + kSymmetricTileBytes) + n;
  size_t begin = 0, end = 0;
  SymmetricSlice(args.count, g.dsize, g.size, g.rank, &begin, &end);
  for (int k = 0; k < g.size; ++k) {
    inputs[k] = call->send(k) + begin * g.dsize;
    outputs[k] = call->recv((g.rank + k) % g.size) + begin * g.dsize;  // own output first
  }
  SymmetricReduce(args, inputs, g.size, outputs, g.size, end - begin, tile);
  return call->Leave();
}

}  // namespace hccltune::algo

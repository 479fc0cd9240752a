// Scatter-allgather broadcast (van de Geijn): the root splits the buffer into n balanced blocks and sends block
// i to rank i (n-1 messages from the root, posted at once), then a ring allgather (ring_engine.h, one chunk per
// block) gives every rank every block. Bytes per rank ~ 2(n-1)/n x buffer instead of the binomial tree's
// log2(n) x buffer at the root, so it wins for large buffers; latency (n-1) x alpha for the ring. Any n and any
// count work (count < n gives empty blocks and zero-byte messages).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status BroadcastScatterAllgather(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  if (g.rank == args.root) CopyOut(args, args.recv, args.send, args.count * g.dsize);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();
  RingLane lane;
  lane.base = static_cast<char*>(args.recv);
  lane.shift = -1;  // rank r starts out holding block r
  for (int b = 0; b < g.size; ++b) {
    lane.block_off.push_back(BlockStart(args.count, g.size, b));
    lane.block_cnt.push_back(BlockCount(args.count, g.size, b));
  }
  auto block = [&](int b) { return At(args.recv, lane.block_off[static_cast<size_t>(b)], g.dsize); };
  auto block_bytes = [&](int b) { return lane.block_cnt[static_cast<size_t>(b)] * g.dsize; };
  if (g.rank == args.root) {
    for (int b = 0; b < g.size; ++b) {
      if (b != g.rank) g.ep->Isend(b, block(b), block_bytes(b));
    }
    HT_RETURN_IF_ERROR(g.ep->WaitAll());
  } else {
    HT_RETURN_IF_ERROR(g.ep->Recv(args.root, block(g.rank), block_bytes(g.rank)));
  }
  return RingAllgather(g, {lane}, lane.block_cnt[0] == 0 ? 1 : lane.block_cnt[0]);
}

}  // namespace hccltune::algo

// Ring allgather: n-1 steps around one logical ring (r sends to r+1, receives from r-1). In step s rank r
// forwards block r-s (its own in step 0) and receives block r-s-1 straight into its place in recv. Blocks are
// cut into chunks of at most `chunk` bytes that are forwarded as soon as they arrive (ring_engine.h), so a
// large block streams through the ring. Any n works.
// Messages per rank: (n-1) x chunks; bytes per rank: (n-1)/n x output (bandwidth-optimal); latency
// (n-1) x alpha. Out of place, the first sends read block r straight from `send`, and this rank copies it into
// recv while they are in flight (with single copy the peer reads it from `send` at the same time), instead of
// copying it before the first send.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status AllgatherRing(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t r = static_cast<size_t>(g.rank);
  char* mine = At(args.recv, r * args.count, g.dsize);
  if (g.size == 1 || args.count == 0) {
    CopyOut(args, mine, args.send, args.count * g.dsize);
    return absl::OkStatus();
  }
  RingLane lane;
  lane.owned_src = static_cast<const char*>(args.send);
  lane.base = static_cast<char*>(args.recv);
  lane.shift = -1;  // this rank starts out holding block r
  for (int b = 0; b < g.size; ++b) {
    lane.block_off.push_back(static_cast<size_t>(b) * args.count);
    lane.block_cnt.push_back(args.count);
  }
  const std::vector<RingLane> lanes{lane};
  const size_t chunk_elems = ChunkElems(config.chunk, g.dsize);
  RingAllgatherState st;
  RingAllgatherStart(g, lanes, chunk_elems, &st);
  CopyOut(args, mine, args.send, args.count * g.dsize);  // `send` stays unchanged: the sends may still read it
  return RingAllgatherFinish(g, lanes, chunk_elems, &st);
}

}  // namespace hccltune::algo

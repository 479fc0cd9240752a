// Double-ring allreduce: two rings running at the same time in opposite directions (ring A: r -> r+1, ring B:
// r -> r-1), each carrying half of the buffer through the ring schedule of allreduce/ring.cc (chunked
// reduce-scatter then allgather). Both directions of every link are busy, which helps on full-duplex links
// where one ring leaves the reverse direction idle.
//
// The buffer's first ceil(count/2) elements go to ring A, the rest to ring B; each half is split into n
// balanced blocks (any n and count work; small counts give empty blocks and zero-byte messages). The two rings
// are interleaved chunk by chunk (A then B) so the message order between any pair is the same on both sides,
// which also makes n = 2 (where next == previous) correct. Every element is reduced once, along its ring, and
// copied back, so results are bit-identical on every rank; an fp32/fp64 avg is finalised once on each owned
// block, an fp16/bf16 avg scales the input as it is copied into recv (internal.h).
// Messages per rank: 2 rings x 2(n-1) x chunks; bytes as a single ring; latency 2(n-1) x alpha.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status AllreduceDoubleRing(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  EnterInput(args, args.recv, args.send, args.count, g.size);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();

  const size_t half[2] = {(args.count + 1) / 2, args.count / 2};
  std::vector<RingLane> lanes(2);
  for (int l = 0; l < 2; ++l) {
    RingLane& lane = lanes[static_cast<size_t>(l)];
    lane.base = At(args.recv, l == 0 ? 0 : half[0], g.dsize);
    lane.direction = l == 0 ? 1 : -1;
    for (int b = 0; b < g.size; ++b) {
      lane.block_off.push_back(BlockStart(half[l], g.size, b));
      lane.block_cnt.push_back(BlockCount(half[l], g.size, b));
    }
  }
  const size_t ce = ChunkElems(config.chunk, g.dsize);
  void* slots = ctx.Scratch(RingSlotBytes(lanes, ce, g.dsize));
  HT_RETURN_IF_ERROR(RingReduceScatter(g, args, lanes, ce, slots));
  if (DividesAtEnd(args)) {
    for (const RingLane& lane : lanes) {
      const size_t owned = static_cast<size_t>(RingOwnedBlock(g, lane));
      FinalizeAvg(args.dtype, At(lane.base, lane.block_off[owned], g.dsize), lane.block_cnt[owned], g.size);
    }
  }
  return RingAllgather(g, lanes, ce);
}

}  // namespace hccltune::algo

// Ring reduce-scatter: the reduce-scatter half of ring allreduce (allreduce/ring.cc). The input's n blocks
// (block i = count elements for rank i) travel around the ring r -> r+1; in step s = 0..n-2 rank r sends its
// running partial of block r-s-1 and receives block r-s-2 from r-1, reducing it in; after n-1 steps rank r
// holds block r fully reduced. Each
// chunk (at most `chunk` bytes) is forwarded as soon as it has been reduced (pipelining). Scratch is the
// working buffer: each received chunk is combined with the caller's input into it (the send buffer is never
// modified, and never copied first), except the last step, which combines into `recv` directly; an fp32/fp64
// avg is divided once at the end, while an fp16/bf16 avg copies the input into scratch scaled by 1/n first
// (internal.h: the ring would send it on raw otherwise). Messages per rank: (n-1) x chunks; bytes (n-1)/n x
// input; latency (n-1) x alpha. Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status ReducescatterRing(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t n = static_cast<size_t>(g.size);
  const size_t bytes = args.count * g.dsize;
  const char* my_input = At(args.send, static_cast<size_t>(g.rank) * args.count, g.dsize);
  if (g.size == 1 || args.count == 0) {
    CopyOut(args, args.recv, my_input, bytes);
    return absl::OkStatus();
  }
  RingLane lane;
  lane.shift = -1;  // rank r ends holding block r
  for (size_t b = 0; b < n; ++b) {
    lane.block_off.push_back(b * args.count);
    lane.block_cnt.push_back(args.count);
  }
  const size_t ce = ChunkElems(config.chunk, g.dsize);
  const std::vector<RingLane> probe = {lane};
  const size_t slot_bytes = RingSlotBytes(probe, ce, g.dsize);
  char* scratch = static_cast<char*>(ctx.Scratch(n * bytes + slot_bytes));
  lane.base = scratch;
  lane.src = static_cast<const char*>(args.send);
  if (ScalesInputs(args)) {
    EnterInput(args, scratch, args.send, n * args.count, g.size);
    lane.src = nullptr;
  }
  lane.owned_out = static_cast<char*>(args.recv);  // the last step reduces straight into the output
  HT_RETURN_IF_ERROR(RingReduceScatter(g, args, {lane}, ce, scratch + n * bytes));
  MaybeFinalizeAvg(args, args.recv, args.count, g.size);
  return absl::OkStatus();
}

}  // namespace hccltune::algo

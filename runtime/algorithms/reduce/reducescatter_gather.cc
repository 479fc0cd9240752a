// Reduce as reduce-scatter then gather (Rabenseifner's reduce): a ring reduce-scatter (ring_engine.h, one chunk
// per block) over n balanced blocks leaves rank i holding block i fully reduced (an fp32/fp64 avg divided there,
// once; fp16/bf16 inputs scaled by 1/n as they are copied into the working buffer); then
// every rank sends its block to the root (n-1 messages into the root, posted at once). Bytes per rank
// ~ 2(n-1)/n x buffer instead of the tree's log2(n) x buffer at the root: better for large buffers; latency
// n x alpha. Any n and count work (count < n: empty blocks, zero-byte messages). Non-root ranks work in
// scratch and never touch recv.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status ReduceReducescatterGather(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const bool root = g.rank == args.root;
  if (root) EnterInput(args, args.recv, args.send, args.count, g.size);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();
  RingLane lane;
  lane.shift = -1;  // rank r ends holding block r
  for (int b = 0; b < g.size; ++b) {
    lane.block_off.push_back(BlockStart(args.count, g.size, b));
    lane.block_cnt.push_back(BlockCount(args.count, g.size, b));
  }
  const size_t ce = std::max<size_t>(1, lane.block_cnt[0]);
  const size_t slot_bytes = RingSlotBytes({lane}, ce, g.dsize);
  char* scratch = static_cast<char*>(ctx.Scratch(bytes + slot_bytes));
  if (root) {
    lane.base = static_cast<char*>(args.recv);
  } else {
    lane.base = scratch + slot_bytes;
    EnterInput(args, lane.base, args.send, args.count, g.size);
  }
  HT_RETURN_IF_ERROR(RingReduceScatter(g, args, {lane}, ce, scratch));
  const size_t mine = static_cast<size_t>(g.rank);
  char* my_block = At(lane.base, lane.block_off[mine], g.dsize);
  MaybeFinalizeAvg(args, my_block, lane.block_cnt[mine], g.size);
  if (!root) return g.ep->Send(args.root, my_block, lane.block_cnt[mine] * g.dsize);
  for (int b = 0; b < g.size; ++b) {
    if (b == g.rank) continue;
    const size_t bb = static_cast<size_t>(b);
    g.ep->Irecv(b, At(lane.base, lane.block_off[bb], g.dsize), lane.block_cnt[bb] * g.dsize);
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

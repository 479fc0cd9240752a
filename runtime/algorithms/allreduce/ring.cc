// Ring allreduce: reduce-scatter then allgather around one logical ring (rank r sends to r+1, receives from
// r-1), as in Gloo's allreduce_ring_chunked and NCCL's ring.
//
// The buffer is split into n blocks (balanced: sizes differ by at most one element, so any count works for any
// n, including n not a power of two and count < n, where some blocks are empty). Each block is cut into the
// same number of chunks of at most `chunk` bytes (config.chunk).
//   Reduce-scatter, steps 0..n-2: rank r sends block r-s and receives block r-s-1, which it reduces into its
//   copy; every chunk is forwarded as soon as it has been reduced, so chunks stream around the ring
//   (pipelining: at any moment different chunks are on different links). After n-1 steps rank r holds block
//   r+1 fully reduced; an fp32/fp64 avg is finalised here, once, on the owned block.
//   Allgather, steps 0..n-2: each fully reduced block travels once around the ring and is copied, never
//   recomputed, so every rank has bit-identical results.
// Messages per rank: 2(n-1) x chunks; bytes per rank: 2(n-1)/n x buffer (bandwidth-optimal); latency
// 2(n-1) x alpha. recv is the working buffer; out of place, the reduce-scatter reads this rank's blocks from
// send and writes recv = send op incoming, so the input is never copied first — except for an fp16/bf16 avg,
// whose input is scaled by 1/n into recv first (internal.h: it is sent on raw otherwise). Over an endpoint that
// receive-and-reduce (RecvReduceEndpoint, shm) each chunk is combined straight out of the shared ring (one copy per
// hop). Over an endpoint that also forwards (ForwardEndpoint; StreamEndpoint: shm and TCP), both phases run as one
// pipeline (RingAllreducePipelined): every received chunk is forwarded as it arrives, and the last reduce-scatter
// step's result goes on as the first allgather message straight from the cache instead of being written out and read
// back; messages leave in wavefront order (chunk + step). Same messages, same results; an fp32/fp64 avg keeps the
// two phases (its owned block is divided in between). Two ranks over shm (ReturnEndpoint) take one
// message per chunk instead (RingAllreduceReturned): the peer reduces the chunk and hands the result back in
// place in the ring it arrived in, so the results need no second ring (13-30% faster at 1-64 MiB than the
// pipelined ring in alternating runs of tests/perf/compare-peers.sh -B).
// config.channels is accepted (striping is the transport's business).
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status AllreduceRing(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  if (g.size == 1 || args.count == 0) {
    CopyBytes(args.recv, args.send, args.count * g.dsize);
    return absl::OkStatus();
  }

  RingLane lane;
  lane.base = static_cast<char*>(args.recv);
  lane.src = static_cast<const char*>(args.send);
  if (ScalesInputs(args)) {
    EnterInput(args, args.recv, args.send, args.count, g.size);
    lane.src = nullptr;
  }
  for (int b = 0; b < g.size; ++b) {
    lane.block_off.push_back(BlockStart(args.count, g.size, b));
    lane.block_cnt.push_back(BlockCount(args.count, g.size, b));
  }
  const size_t ce = ChunkElems(config.chunk, g.dsize);
  if (g.caps.recv_reduce != nullptr && g.caps.forward != nullptr && !DividesAtEnd(args)) {
    if (g.size == 2 && g.caps.returns != nullptr && g.caps.returns->SupportsReturn(1 - g.rank)) {
      return RingAllreduceReturned(g, args, lane, ce);
    }
    return RingAllreducePipelined(g, args, lane, ce);
  }
  const std::vector<RingLane> lanes = {lane};
  void* slots = g.caps.recv_reduce != nullptr ? nullptr : ctx.Scratch(RingSlotBytes(lanes, ce, g.dsize));
  HT_RETURN_IF_ERROR(RingReduceScatter(g, args, lanes, ce, slots));
  if (DividesAtEnd(args)) {
    const size_t owned = static_cast<size_t>(RingOwnedBlock(g, lane));
    FinalizeAvg(args.dtype, At(lane.base, lane.block_off[owned], g.dsize), lane.block_cnt[owned], g.size);
  }
  return RingAllgather(g, lanes, ce);
}

}  // namespace hccltune::algo

// The chunked, pipelined ring schedule shared by the ring-family algorithms (allreduce ring and double_ring,
// reducescatter ring, allgather ring, allgatherv ring, broadcast scatter_allgather). Internal.
//
// A lane is one logical ring over `n` blocks of a buffer, running in one direction. With v = this rank's
// position on the ring (v = r for direction +1, n-1-r for -1), schedule block b stands for buffer block
// (b + shift) mod n.
//   reduce-scatter, step s = 0..n-2: send block v-s to the next rank, receive block v-s-1 from the previous
//     rank into a scratch slot and reduce it into the buffer; after n-1 steps this rank holds block v+1 fully
//     reduced (each block's value is computed once, along the ring).
//   allgather, step s = 0..n-2: send block v+1-s, receive block v-s straight into the buffer.
// Every block is cut into the same number of chunks (from the largest block and `chunk_elems`; chunks past a
// smaller block's end are zero-byte messages), and each chunk moves on as soon as it arrived: a lane sends
// (n-1) x chunks messages per phase. Several lanes are interleaved chunk by chunk in lane order, so the
// message order between any pair of ranks is the same on both sides.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

struct RingLane {
  char* base = nullptr;           // the lane's buffer (block offsets are relative to it)
  std::vector<size_t> block_off;  // n block offsets, in elements
  std::vector<size_t> block_cnt;  // n block sizes, in elements
  int direction = 1;              // +1: send to rank+1; -1: send to rank-1
  int shift = 0;                  // schedule block b = buffer block (b + shift) mod n
  // This rank's input for the reduce-scatter, laid out like `base` (null: `base` holds it). With a separate
  // input the reduce-scatter writes base = input op incoming and sends its first blocks from the input, so an
  // out-of-place caller needs no initial copy (each block is combined into `base` exactly once).
  const char* src = nullptr;
  // Allgather only: where the block this lane sends first (RingOwnedBlock) is read from, when it is not yet in
  // `base` (null: `base` holds it). The caller posts the ring and copies that block into `base` while the first
  // sends are in flight, instead of copying before the first send.
  const char* owned_src = nullptr;
  // Reduce-scatter only: where the last step writes the block this rank ends up owning (RingOwnedBlock), laid
  // out from that block's start (null: in `base`). A reduce-scatter whose result is the caller's output writes it
  // there at once instead of into the working buffer and then copying it.
  char* owned_out = nullptr;
};

// Chunks per block for these lanes (at least 1).
size_t RingChunks(const RingLane& lane, size_t chunk_elems);
// Scratch bytes the reduce-scatter phase needs for its receive slots.
size_t RingSlotBytes(const std::vector<RingLane>& lanes, size_t chunk_elems, size_t dsize);
// The buffer block a lane holds complete after its reduce-scatter phase (= the one it sends first in allgather).
int RingOwnedBlock(const Group& g, const RingLane& lane);

// REQUIRES: g.size >= 2; `slots` has RingSlotBytes() bytes (unused, and may be null, when the endpoint
// a RecvReduceEndpoint (Group::caps): chunks are then combined straight out of the transport, all receives posted at
// once).
absl::Status RingReduceScatter(const Group& g, const CollectiveArgs& args, const std::vector<RingLane>& lanes,
                               size_t chunk_elems, void* slots);
absl::Status RingAllgather(const Group& g, const std::vector<RingLane>& lanes, size_t chunk_elems);

// Reduce-scatter and allgather as one pipeline over one lane, for endpoints with a ForwardEndpoint: per chunk
// c, message (c, 0) carries this rank's block from the input and every later message (c, s) is the previous
// rank's message (c, s - 1) combined (reduce-scatter steps) or stored (allgather steps) and forwarded at once by
// ForwardEndpoint::IrecvForward — the last reduce-scatter step's result goes straight on as the first allgather
// message, from the cache. Messages leave in wavefront order (c + s, then s), so at any moment different chunks
// are at different steps. The same messages and results as RingReduceScatter + RingAllgather (each block
// reduced once along the ring, then copied); not for an fp32/fp64 avg (the owned block would need finalising
// first); an fp16/bf16 avg is a sum of inputs scaled beforehand (internal.h), which it is fine with.
// REQUIRES: g.size >= 2; g.caps.recv_reduce and g.caps.forward; !DividesAtEnd(args).
absl::Status RingAllreducePipelined(const Group& g, const CollectiveArgs& args, const RingLane& lane,
                                    size_t chunk_elems);
// Two ranks over an endpoint whose ReturnEndpoint SupportsReturn(peer) (shm): each chunk of this rank's block goes to
// the peer once (ReturnEndpoint::IsendReturn), the peer reduces it with its own input and hands the result back in
// place, so both halves of the allreduce take one message per chunk and one ring. The block this rank reduces arrives
// the same way from the peer. Bytes through the ring per rank: the buffer's half sent and its half returned, as in the
// two-phase ring; ring space touched: half. Results as RingAllreducePipelined (each block reduced once, by one rank,
// and copied to the other). Same requirements as RingAllreducePipelined, and g.size == 2.
absl::Status RingAllreduceReturned(const Group& g, const CollectiveArgs& args, const RingLane& lane,
                                   size_t chunk_elems);
// The same in two halves, so the caller can work between posting and finishing: RingAllgatherStart posts every
// receive and the first sends, RingAllgatherFinish forwards and waits. `ops` is the state between the two.
// REQUIRES: g.size >= 2; Finish is called once after Start with the same lanes; until Finish returns, every
// lane's buffer and `owned_src` stay valid and the blocks being sent (including `owned_src`) unchanged.
struct RingAllgatherState {
  struct Op {
    int step;
    size_t chunk;
    size_t lane;
    OpHandle handle;
  };
  std::vector<Op> ops;
};
void RingAllgatherStart(const Group& g, const std::vector<RingLane>& lanes, size_t chunk_elems, RingAllgatherState* st);
absl::Status RingAllgatherFinish(const Group& g, const std::vector<RingLane>& lanes, size_t chunk_elems,
                                 RingAllgatherState* st);

}  // namespace hccltune::algo

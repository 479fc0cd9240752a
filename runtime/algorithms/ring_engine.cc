#include "runtime/algorithms/ring_engine.h"

#include <algorithm>

namespace hccltune::algo {
namespace {

int Position(const Group& g, const RingLane& lane) { return lane.direction > 0 ? g.rank : g.size - 1 - g.rank; }
int Next(const Group& g, const RingLane& lane) { return Mod(g.rank + lane.direction, g.size); }
int Prev(const Group& g, const RingLane& lane) { return Mod(g.rank - lane.direction, g.size); }

// Elements [first, first+count) of chunk c of buffer block `block`.
struct Piece {
  size_t first;
  size_t count;
};
Piece ChunkOf(const RingLane& lane, int block, size_t c, size_t chunk_elems) {
  const size_t cnt = lane.block_cnt[static_cast<size_t>(block)];
  const size_t lo = std::min(cnt, c * chunk_elems);
  const size_t hi = std::min(cnt, lo + chunk_elems);
  return {lane.block_off[static_cast<size_t>(block)] + lo, hi - lo};
}

int BufferBlock(const Group& g, const RingLane& lane, int sched) { return Mod(sched + lane.shift, g.size); }

size_t MaxChunks(const std::vector<RingLane>& lanes, size_t chunk_elems) {
  size_t m = 1;
  for (const RingLane& l : lanes) m = std::max(m, RingChunks(l, chunk_elems));
  return m;
}

}  // namespace

size_t RingChunks(const RingLane& lane, size_t chunk_elems) {
  size_t biggest = 0;
  for (size_t c : lane.block_cnt) biggest = std::max(biggest, c);
  return std::max<size_t>(1, CeilDiv(biggest, chunk_elems));
}

size_t RingSlotBytes(const std::vector<RingLane>& lanes, size_t chunk_elems, size_t dsize) {
  size_t biggest = 0;
  for (const RingLane& l : lanes) {
    for (size_t c : l.block_cnt) biggest = std::max(biggest, std::min(c, chunk_elems));
  }
  return 2 * biggest * dsize;
}

int RingOwnedBlock(const Group& g, const RingLane& lane) { return BufferBlock(g, lane, Position(g, lane) + 1); }

absl::Status RingReduceScatter(const Group& g, const CollectiveArgs& args, const std::vector<RingLane>& lanes,
                               size_t chunk_elems, void* slots) {
  const int n = g.size;
  const size_t chunks = MaxChunks(lanes, chunk_elems);
  auto input = [](const RingLane& lane) { return lane.src != nullptr ? lane.src : lane.base; };

  // Step 0 sends: this rank's own block, every chunk.
  for (size_t c = 0; c < chunks; ++c) {
    for (const RingLane& lane : lanes) {
      if (c >= RingChunks(lane, chunk_elems)) continue;
      const Piece p = ChunkOf(lane, BufferBlock(g, lane, Position(g, lane)), c, chunk_elems);
      g.ep->Isend(Next(g, lane), At(input(lane), p.first, g.dsize), p.count * g.dsize);
    }
  }
  struct Op {
    int step;
    size_t chunk;
    size_t lane;
  };
  std::vector<Op> ops;
  for (int s = 0; s + 1 < n; ++s) {
    for (size_t c = 0; c < chunks; ++c) {
      for (size_t l = 0; l < lanes.size(); ++l) {
        if (c < RingChunks(lanes[l], chunk_elems)) ops.push_back({s, c, l});
      }
    }
  }
  auto piece_of = [&](const Op& op) {
    const RingLane& lane = lanes[op.lane];
    return ChunkOf(lane, BufferBlock(g, lane, Position(g, lane) - op.step - 1), op.chunk, chunk_elems);
  };
  // Where op's result goes: `base`, or owned_out for the last step's (owned) block.
  auto out_of = [&](const Op& op, const Piece& p) {
    const RingLane& lane = lanes[op.lane];
    if (op.step + 2 < n || lane.owned_out == nullptr) return At(lane.base, p.first, g.dsize);
    const size_t start = lane.block_off[static_cast<size_t>(RingOwnedBlock(g, lane))];
    return At(lane.owned_out, p.first - start, g.dsize);
  };
  if (g.caps.recv_reduce != nullptr) {
    // Single copy: every receive combines straight out of the transport into `base`; forward once reduced.
    const Combiner combiner = MakeCombiner(args);
    std::vector<OpHandle> handles(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      const RingLane& lane = lanes[ops[i].lane];
      const Piece p = piece_of(ops[i]);
      handles[i] = g.caps.recv_reduce->IrecvReduce(Prev(g, lane), out_of(ops[i], p), At(input(lane), p.first, g.dsize),
                                                   p.count * g.dsize, &combiner);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      HT_RETURN_IF_ERROR(g.ep->Wait(handles[i]));
      if (ops[i].step + 2 < n) {
        const RingLane& lane = lanes[ops[i].lane];
        const Piece p = piece_of(ops[i]);
        g.ep->Isend(Next(g, lane), At(lane.base, p.first, g.dsize), p.count * g.dsize);
      }
    }
    return g.ep->WaitAll();
  }
  const size_t slot_bytes = RingSlotBytes(lanes, chunk_elems, g.dsize) / 2;
  char* slot[2] = {static_cast<char*>(slots), static_cast<char*>(slots) + slot_bytes};
  auto post = [&](size_t i) {
    const RingLane& lane = lanes[ops[i].lane];
    return g.ep->Irecv(Prev(g, lane), slot[i % 2], piece_of(ops[i]).count * g.dsize);
  };
  OpHandle pending = ops.empty() ? 0 : post(0);
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpHandle current = pending;
    if (i + 1 < ops.size()) pending = post(i + 1);
    HT_RETURN_IF_ERROR(g.ep->Wait(current));
    const RingLane& lane = lanes[ops[i].lane];
    const Piece p = piece_of(ops[i]);
    char* dst = out_of(ops[i], p);
    Combine(args, dst, At(input(lane), p.first, g.dsize), slot[i % 2], p.count);
    if (ops[i].step + 2 < n) g.ep->Isend(Next(g, lane), dst, p.count * g.dsize);
  }
  return g.ep->WaitAll();
}

absl::Status RingAllreducePipelined(const Group& g, const CollectiveArgs& args, const RingLane& lane,
                                    size_t chunk_elems) {
  const int n = g.size;
  const int pos = Position(g, lane);
  const int next = Next(g, lane);
  const int prev = Prev(g, lane);
  const int last = 2 * n - 3;  // steps 0..n-2 reduce-scatter, n-1..last allgather
  const size_t chunks = RingChunks(lane, chunk_elems);
  const char* input = lane.src != nullptr ? lane.src : lane.base;
  const Combiner combiner = MakeCombiner(args);
  // The buffer block carried by message (c, t) from the previous rank, i.e. received at step t.
  auto recv_block = [&](int t) { return BufferBlock(g, lane, t <= n - 2 ? pos - t - 1 : pos - (t - (n - 1))); };
  // Wavefront order: message (c, s) goes out at position c + s, steps in order within a wavefront; the receive
  // of (c, t) is posted with its forward (c, t + 1), so receives run in the previous rank's send order too.
  for (size_t w = 0; w < chunks + static_cast<size_t>(last) + 1; ++w) {
    for (int s = 0; s <= last + 1; ++s) {
      if (w < static_cast<size_t>(s) || w - static_cast<size_t>(s) >= chunks) continue;
      const size_t c = w - static_cast<size_t>(s);
      if (s == 0) {
        const Piece p = ChunkOf(lane, BufferBlock(g, lane, pos), c, chunk_elems);
        g.ep->Isend(next, At(input, p.first, g.dsize), p.count * g.dsize);
        continue;
      }
      const int t = s - 1;
      const Piece p = ChunkOf(lane, recv_block(t), c, chunk_elems);
      char* out = At(lane.base, p.first, g.dsize);
      if (t == last) {
        g.ep->Irecv(prev, out, p.count * g.dsize);
      } else if (t <= n - 2) {
        OpHandle send = 0;
        g.caps.forward->IrecvForward(prev, out, At(input, p.first, g.dsize), p.count * g.dsize, &combiner, next, &send);
      } else {
        OpHandle send = 0;
        g.caps.forward->IrecvForward(prev, out, nullptr, p.count * g.dsize, nullptr, next, &send);
      }
    }
  }
  return g.ep->WaitAll();
}

absl::Status RingAllreduceReturned(const Group& g, const CollectiveArgs& args, const RingLane& lane,
                                   size_t chunk_elems) {
  const int pos = Position(g, lane);
  const int peer = Next(g, lane);
  const size_t chunks = RingChunks(lane, chunk_elems);
  const char* input = lane.src != nullptr ? lane.src : lane.base;
  const Combiner combiner = MakeCombiner(args);
  const int mine = BufferBlock(g, lane, pos), theirs = BufferBlock(g, lane, pos - 1);
  for (size_t c = 0; c < chunks; ++c) {
    const Piece s = ChunkOf(lane, mine, c, chunk_elems);
    g.caps.returns->IsendReturn(peer, At(input, s.first, g.dsize), s.count * g.dsize, At(lane.base, s.first, g.dsize));
    const Piece r = ChunkOf(lane, theirs, c, chunk_elems);
    g.caps.returns->IrecvReduceReturn(peer, At(lane.base, r.first, g.dsize), At(input, r.first, g.dsize),
                                      r.count * g.dsize, &combiner);
  }
  return g.ep->WaitAll();
}

void RingAllgatherStart(const Group& g, const std::vector<RingLane>& lanes, size_t chunk_elems,
                        RingAllgatherState* st) {
  const int n = g.size;
  const size_t chunks = MaxChunks(lanes, chunk_elems);
  auto piece_of = [&](const RingLane& lane, int sched, size_t c) {
    return ChunkOf(lane, BufferBlock(g, lane, sched), c, chunk_elems);
  };
  st->ops.clear();
  for (int s = 0; s + 1 < n; ++s) {
    for (size_t c = 0; c < chunks; ++c) {
      for (size_t l = 0; l < lanes.size(); ++l) {
        const RingLane& lane = lanes[l];
        if (c >= RingChunks(lane, chunk_elems)) continue;
        const Piece p = piece_of(lane, Position(g, lane) - s, c);
        st->ops.push_back({s, c, l, g.ep->Irecv(Prev(g, lane), At(lane.base, p.first, g.dsize), p.count * g.dsize)});
      }
    }
  }
  for (size_t c = 0; c < chunks; ++c) {
    for (const RingLane& lane : lanes) {
      if (c >= RingChunks(lane, chunk_elems)) continue;
      const int block = BufferBlock(g, lane, Position(g, lane) + 1);
      const Piece p = ChunkOf(lane, block, c, chunk_elems);
      const char* from = lane.owned_src != nullptr
                             ? At(lane.owned_src, p.first - lane.block_off[static_cast<size_t>(block)], g.dsize)
                             : At(lane.base, p.first, g.dsize);
      g.ep->Isend(Next(g, lane), from, p.count * g.dsize);
    }
  }
}

absl::Status RingAllgatherFinish(const Group& g, const std::vector<RingLane>& lanes, size_t chunk_elems,
                                 RingAllgatherState* st) {
  const int n = g.size;
  for (const RingAllgatherState::Op& op : st->ops) {
    HT_RETURN_IF_ERROR(g.ep->Wait(op.handle));
    if (op.step + 2 < n) {
      const RingLane& lane = lanes[op.lane];
      const Piece p = ChunkOf(lane, BufferBlock(g, lane, Position(g, lane) - op.step), op.chunk, chunk_elems);
      g.ep->Isend(Next(g, lane), At(lane.base, p.first, g.dsize), p.count * g.dsize);
    }
  }
  return g.ep->WaitAll();
}

absl::Status RingAllgather(const Group& g, const std::vector<RingLane>& lanes, size_t chunk_elems) {
  RingAllgatherState st;
  RingAllgatherStart(g, lanes, chunk_elems, &st);
  return RingAllgatherFinish(g, lanes, chunk_elems, &st);
}

}  // namespace hccltune::algo

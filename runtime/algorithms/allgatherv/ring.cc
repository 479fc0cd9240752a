// Ring allgatherv: the ring allgather (allgather/ring.cc) over blocks of different sizes, rank i's block being
// counts[i] elements at displs[i] of recv. Every block is cut into the same number of chunks (from the largest
// block and `chunk`), so ranks agree on the message sequence; chunks past a small block's end are zero-byte
// messages. Messages per rank: (n-1) x chunks; latency (n-1) x alpha. Any n works; all counts zero sends nothing.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/ring_engine.h"

namespace hccltune::algo {

absl::Status AllgathervRing(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t n = static_cast<size_t>(g.size);
  if (args.counts.size() < n || args.displs.size() < n) {
    return absl::InvalidArgumentError(absl::StrCat("allgatherv needs ", n, " counts and displs"));
  }
  const size_t r = static_cast<size_t>(g.rank);
  char* mine = At(args.recv, args.displs[r], g.dsize);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += args.counts[i];
  if (g.size == 1 || total == 0) {
    CopyOut(args, mine, args.send, args.counts[r] * g.dsize);
    return absl::OkStatus();
  }
  RingLane lane;
  lane.base = static_cast<char*>(args.recv);
  lane.shift = -1;
  lane.block_off.assign(args.displs.begin(), args.displs.begin() + static_cast<std::ptrdiff_t>(n));
  lane.block_cnt.assign(args.counts.begin(), args.counts.begin() + static_cast<std::ptrdiff_t>(n));
  lane.owned_src = static_cast<const char*>(args.send);  // the first sends read `send`; the own copy overlaps them
  const std::vector<RingLane> lanes{lane};
  const size_t chunk_elems = ChunkElems(config.chunk, g.dsize);
  RingAllgatherState st;
  RingAllgatherStart(g, lanes, chunk_elems, &st);
  CopyOut(args, mine, args.send, args.counts[r] * g.dsize);
  return RingAllgatherFinish(g, lanes, chunk_elems, &st);
}

}  // namespace hccltune::algo

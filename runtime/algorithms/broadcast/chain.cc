// Chain (pipelined) broadcast: the ranks form a chain root, root+1, ..., root+n-1; the buffer is cut into
// chunks of at most `chunk` bytes, and every rank forwards each chunk to the next rank as soon as it has
// arrived, so after the pipeline fills every link carries a different chunk at once. Time ~ (n-2 + chunks) x
// chunk time: near link bandwidth for large buffers. Messages: chunks per rank (the last rank only receives).
// Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status BroadcastChain(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  if (g.rank == args.root) CopyOut(args, args.recv, args.send, args.count * g.dsize);
  if (g.size == 1 || args.count == 0) return absl::OkStatus();
  const int v = Mod(g.rank - args.root, g.size);
  const int prev = Mod(g.rank - 1, g.size), next = Mod(g.rank + 1, g.size);
  const size_t ce = ChunkElems(config.chunk, g.dsize);
  const size_t chunks = CeilDiv(args.count, ce);
  auto piece = [&](size_t c) { return std::min(ce, args.count - c * ce) * g.dsize; };
  char* buf = static_cast<char*>(args.recv);
  if (v == 0) {
    for (size_t c = 0; c < chunks; ++c) g.ep->Isend(next, buf + c * ce * g.dsize, piece(c));
    return g.ep->WaitAll();
  }
  std::vector<OpHandle> recvs(chunks);
  for (size_t c = 0; c < chunks; ++c) recvs[c] = g.ep->Irecv(prev, buf + c * ce * g.dsize, piece(c));
  for (size_t c = 0; c < chunks; ++c) {
    HT_RETURN_IF_ERROR(g.ep->Wait(recvs[c]));
    if (v + 1 < g.size) g.ep->Isend(next, buf + c * ce * g.dsize, piece(c));
  }
  return g.ep->WaitAll();
}

}  // namespace hccltune::algo

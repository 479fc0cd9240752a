// Bruck alltoall: ceil(log2 n) rounds instead of n-1, at the price of sending each block up to log2(n) times.
//   1. Rotate: position i of a scratch buffer holds the block for rank r+i (mod n).
//   2. For d = 1, 2, 4, ...: pack the positions i with bit d set, send them to rank r+d, receive the same
//      positions from rank r-d, unpack. A block at position i moves by exactly i ranks in total.
//   3. Position i now holds rank r-i's block for this rank: copy it to recv block r-i.
// Messages per rank: ceil(log2 n), each of about n/2 blocks; latency ceil(log2 n) x alpha, so it wins for
// small blocks on many ranks. Any n works. Scratch: the rotated buffer plus two pack buffers.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AlltoallBruck(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t bytes = args.count * g.dsize;
  const size_t n = static_cast<size_t>(g.size);
  if (args.count == 0) return absl::OkStatus();
  if (g.size == 1) {
    CopyOut(args, args.recv, args.send, bytes);
    return absl::OkStatus();
  }
  char* rot = static_cast<char*>(ctx.Scratch(3 * n * bytes));
  char* pack_out = rot + n * bytes;
  char* pack_in = pack_out + (n / 2 + 1) * bytes;
  const char* in = static_cast<const char*>(args.send);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(rot + i * bytes, in + static_cast<size_t>(Mod(g.rank + static_cast<int>(i), g.size)) * bytes, bytes);
  }
  for (size_t d = 1; d < n; d <<= 1) {
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i & d) std::memcpy(pack_out + (k++) * bytes, rot + i * bytes, bytes);
    }
    const int dd = static_cast<int>(d);
    HT_RETURN_IF_ERROR(
        g.ep->SendRecv(Mod(g.rank + dd, g.size), pack_out, k * bytes, Mod(g.rank - dd, g.size), pack_in, k * bytes));
    k = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i & d) std::memcpy(rot + i * bytes, pack_in + (k++) * bytes, bytes);
    }
  }
  char* out = static_cast<char*>(args.recv);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(out + static_cast<size_t>(Mod(g.rank - static_cast<int>(i), g.size)) * bytes, rot + i * bytes, bytes);
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

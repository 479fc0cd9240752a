// Pairwise-exchange alltoallv: like alltoall/pairwise.cc with per-peer sizes: in round k = 1..n-1 rank r sends
// send_counts[r+k] elements at send_displs[r+k] to rank r+k and receives recv_counts[r-k] elements at
// recv_displs[r-k] from rank r-k (zero-byte messages for empty blocks, so both sides agree). Each rank only
// knows its own counts; the sizes of a pair's messages must agree (the endpoint reports a mismatch). In place
// (send == recv), the input is first copied to scratch. Any n works.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status AlltoallvPairwise(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  const size_t n = static_cast<size_t>(g.size);
  if (args.send_counts.size() < n || args.send_displs.size() < n || args.recv_counts.size() < n ||
      args.recv_displs.size() < n) {
    return absl::InvalidArgumentError(absl::StrCat("alltoallv needs ", n, " send/recv counts and displs"));
  }
  const char* in = static_cast<const char*>(args.send);
  if (args.send == args.recv && g.size > 1) {
    size_t extent = 0;
    for (size_t i = 0; i < n; ++i) extent = std::max(extent, args.send_displs[i] + args.send_counts[i]);
    char* copy = static_cast<char*>(ctx.Scratch(extent * g.dsize));
    if (extent != 0) std::memcpy(copy, args.send, extent * g.dsize);
    in = copy;
  }
  const size_t r = static_cast<size_t>(g.rank);
  if (args.send_counts[r] != args.recv_counts[r]) {
    return absl::InvalidArgumentError(absl::StrCat("alltoallv: rank ", r, " sends ", args.send_counts[r],
                                                   " elements to itself but expects ", args.recv_counts[r]));
  }
  CopyOut(args, At(args.recv, args.recv_displs[r], g.dsize), At(in, args.send_displs[r], g.dsize),
          args.send_counts[r] * g.dsize);
  for (int k = 1; k < g.size; ++k) {
    const size_t to = static_cast<size_t>(Mod(g.rank + k, g.size)), from = static_cast<size_t>(Mod(g.rank - k, g.size));
    HT_RETURN_IF_ERROR(g.ep->SendRecv(
        static_cast<int>(to), At(in, args.send_displs[to], g.dsize), args.send_counts[to] * g.dsize,
        static_cast<int>(from), At(args.recv, args.recv_displs[from], g.dsize), args.recv_counts[from] * g.dsize));
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

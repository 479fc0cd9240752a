// Dissemination barrier (Hensgen, Finkel and Manber): ceil(log2 n) rounds; in the round with distance
// d = 1, 2, 4, ... rank r sends a zero-byte message to r+d and waits for one from r-d. After round k every rank
// has (transitively) heard from 2^(k+1) ranks, so after the last round no rank can leave before every rank
// has arrived. Works for any n (no power-of-two fold needed); one message per rank per round.
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

absl::Status BarrierDissemination(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Group> group = Open(args, config, ctx);
  if (!group.ok()) return group.status();
  const Group& g = *group;
  for (int d = 1; d < g.size; d <<= 1) {
    HT_RETURN_IF_ERROR(g.ep->SendRecv(Mod(g.rank + d, g.size), nullptr, 0, Mod(g.rank - d, g.size), nullptr, 0));
  }
  return absl::OkStatus();
}

}  // namespace hccltune::algo

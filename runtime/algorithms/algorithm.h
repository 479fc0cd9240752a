// The contract between the runtime and one collective algorithm.
//
// An algorithm is a function that runs one collective call on this rank, given the call's arguments, its
// configuration (canonical form, see docs/CONVENTIONS.md) and a context that hands out endpoints and
// scratch memory. Every rank of the group calls the same algorithm with the same configuration and matching
// arguments; the algorithm talks to peers only through Endpoint.
//
// Buffer conventions (counts are in elements of `dtype`, n = group size, r = this rank):
//   allreduce      send[count]            -> recv[count]
//   allgather      send[count]            -> recv[n*count]          (rank i's block at i*count)
//   allgatherv     send[counts[r]]        -> recv[sum counts]       (rank i's block at displs[i])
//   reducescatter  send[n*count]          -> recv[count]            (rank r gets block r reduced)
//   broadcast      root: send[count]      -> every rank's recv[count]
//   reduce         send[count]            -> root's recv[count]
//   gather         send[count]            -> root's recv[n*count]
//   scatter        root: send[n*count]    -> recv[count]
//   alltoall       send[n*count]          -> recv[n*count]          (block i goes to / comes from rank i)
//   alltoallv      send: send_counts[i] at send_displs[i] -> rank i; recv: recv_counts[i] at recv_displs[i]
//   barrier        no buffers
// In place: `send == recv` (for allgather/gather: send points at this rank's block inside recv; for
// reducescatter/scatter: recv points at block r inside send). Algorithms must support both; for every other overlap
// of send and recv the communicator hands them a copy of the input.
//
// Numerics (docs/CONVENTIONS.md): fp16/bf16 are reduced in fp32 within a step and rounded once per step; every rank
// ends with bit-identical results — a value is computed once and copied, never recomputed in another order.
// avg (floating types only): fp32/fp64 = sum, then one division by n, applied once to the final sum before it is
// distributed; fp16/bf16 = the sum of the inputs each scaled by 1/n where it enters the reduction, so partials do
// not overflow where the average fits (internal.h, kernels.h). Floating min/max propagate NaN and order -0 < +0,
// commutatively (kernels.h), so no algorithm's combining order shows in the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/common/configuration.h"
#include "runtime/common/stream_copy.h"
#include "runtime/common/types.h"
#include "runtime/transport/endpoint.h"

namespace hccltune {

struct CollectiveArgs {
  Collective collective = Collective::kAllreduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  // allgatherv: counts/displs of every rank's block in recv. alltoallv: per-peer send and receive layout.
  absl::Span<const size_t> counts, displs;
  absl::Span<const size_t> send_counts, send_displs, recv_counts, recv_displs;
  // Where writes bypass the caches (the output buffer of a large call; set by the communicator, empty
  // otherwise): Combine() and the endpoint's receives into it use non-temporal stores.
  StreamRegion stream;
};

// The node each rank of the group is on: node_of[i] is a dense node index in [0, num_nodes).
struct GroupTopology {
  std::vector<int> node_of;
  int num_nodes = 1;
};

// Where a call buffer lies in symmetric memory (Communicator::AllocSymmetric): allocation `id` (the same id on
// every rank: allocations are collective) and the byte offset in this rank's piece of it.
struct SymmetricBuffer {
  uint64_t id = 0;
  size_t offset = 0;
};

// What an algorithm may ask of the runtime during one call.
class AlgorithmContext {
 public:
  virtual ~AlgorithmContext() = default;
  // The endpoint for the whole group over `link` (shm, tcp, tcp@NET; auto = the runtime's route choice).
  virtual absl::StatusOr<Endpoint*> GetEndpoint(const LinkSpec& link) = 0;
  virtual const GroupTopology& topology() const = 0;
  // This rank's index in the group (what every endpoint of this context reports as rank()).
  virtual int rank() const = 0;
  // Scratch memory reused across calls; valid until the algorithm returns; one region per call (partition it
  // yourself; a second call returns the same region, grown if needed, contents not preserved). A
  // sub-collective run through RunSubCollective gets its own region, distinct from its parent's. Growth past
  // the preallocated buffer is counted as a hot-path allocation ("fallback to malloc").
  virtual void* Scratch(size_t bytes) = 0;
  // Runs a sub-collective among `members` (group ranks, ascending; must include this rank) with the given
  // configuration. `args.root` is a rank *within* members. Used by hierarchical algorithms.
  virtual absl::Status RunSubCollective(const CollectiveArgs& args, const Configuration& config,
                                        absl::Span<const int> members) = 0;
  // The configuration the communicator's selector chooses for one step of a hierarchical algorithm whose own
  // configuration names none for the step's collective: collective `c` of `bytes` (docs/CONVENTIONS.md) among the
  // `group_size` ranks of one level: one node (`nodes` 1), or one rank on each of `nodes` = `group_size` nodes.
  // The same answer on every rank.
  virtual absl::StatusOr<Configuration> ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes) = 0;
  // Whether [p, p + bytes) lies inside one of this rank's symmetric allocations; fills *out when it does.
  // Always false inside a sub-collective (its ranks are not the allocation's).
  virtual bool FindSymmetric(const void* p, size_t bytes, SymmetricBuffer* out) const {
    (void)p, (void)bytes, (void)out;
    return false;
  }
  // Every group rank's piece of symmetric allocation `id` as mapped here (indexed by group rank), or null when
  // this rank has no allocation by that id (freed, or inside a sub-collective).
  virtual const std::vector<char*>* SymmetricBases(uint64_t id) const {
    (void)id;
    return nullptr;
  }
};

using AlgorithmFn = absl::Status (*)(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx);

// The mailbox form of an algorithm: its branch for a call that is exactly one MailboxEndpoint::Exchange, run on
// `ep` (the mailbox of the whole group's endpoint that the algorithm's own run used, one that fits the call; this
// rank `rank` of `size`) and `blocks` (`size` pointers of scratch), without an AlgorithmContext. The algorithm's own
// run takes the same branch through it, so both are one code path. A remembered small call (CommImpl's CallMemo) whose
// first run was that one exchange and nothing else repeats through it: no context, endpoint lookup or group to set up —
// each instruction of a 4-rank small call on 2 CPUs counts about three times.
using ExchangeFn = absl::Status (*)(const CollectiveArgs& args, MailboxEndpoint& ep, int rank, int size,
                                    const void** blocks);

// An InvalidArgument every rank of the call reaches together, after exchanging what decides it (the symmetric
// algorithms' header and exit rounds), as opposed to one rank's own refusal of its arguments: the communicator
// does not announce it as a refusal the others must stop waiting for (CommImpl::Refuse) — they are not waiting.
inline constexpr char kAgreedVerdictPayload[] = "hccltune/agreed-verdict";
absl::Status AgreedVerdict(absl::Status s);
bool IsAgreedVerdict(const absl::Status& s);

}  // namespace hccltune

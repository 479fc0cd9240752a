// The algorithm registry: which algorithms exist for each collective, their tunable parameters (from the
// common catalogue), sweep candidates and validity per world size and topology — what is *valid*. Which valid
// configuration is *preferred* is policies/' business (the built-in defaults), applied by the selector.
//
// Every rank must make the same choices: all functions here are deterministic functions of their arguments.
// Thread-safety: the registry is immutable after static initialisation; every function is safe to call
// concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/algorithms/algorithm.h"
#include "runtime/common/configuration.h"
#include "runtime/common/types.h"

namespace hccltune {
namespace registry {

// The implementation of `name` for collective `c`, or nullptr when there is none.
AlgorithmFn Find(Collective c, absl::string_view name);
// The mailbox form (ExchangeFn, algorithm.h) of `name` for `c`, or nullptr when it has none.
ExchangeFn FindExchange(Collective c, absl::string_view name);

// Names of the algorithms implemented for `c`, in registry order (empty for kSendRecv).
std::vector<std::string> AlgorithmsFor(Collective c);

// An algorithm's cost in the alpha-beta model, written once beside its registry entry and shown by
// docs/ALGORITHMS.md (a test keeps the two equal). Both are expressions over
//   p  ranks, n  the call's bytes (docs/CONVENTIONS.md, Sizes), l  ranks per node, m  nodes (p = l*m),
//   c  the configuration's chunk bytes,
// with integers, + - * / (real division), parentheses and the functions log2, ceil, floor, min, max,
// pow2(x) = the largest power of two <= x, fold(x) = 1 when x is not a power of two, else 0.
//   steps  message rounds one after another on the critical path (the alpha term);
//   bytes  the most bytes any one rank sends, or receives, over the whole call (the beta term); a pipeline across
//          nodes adds the chunks that fill it on the network.
// `across` says how the algorithm's traffic meets the network when its ranks span nodes (ranks numbered node by
// node), for the cost model (model/predict.h):
//   kOnePerNode  a ring or chain: one rank of a node sends to the next node at a time, so a node's NIC carries one
//                rank's `bytes`;
//   kEveryRank   every rank sends to ranks of other nodes at once: a node's l ranks share its NIC;
//   kLevels      a step inside each node, then one between nodes: `steps`/`bytes` with m = 1 are the step inside a
//                node, with l = 1 the step between nodes (there: the bytes through one NIC).
//   kDoubling    partners at distances that double or halve (recursive doubling and halving, binomial trees,
//                Bruck): the rounds at distances of l or more cross nodes, every rank of a node at once (sharing
//                its NICs); `steps`/`bytes` with l = 1 (p = m) are those rounds, and the rest of the whole call's
//                the rounds inside a node.
//   kTree        a binomial tree: as kDoubling, but in a round between nodes only one rank of a node is still in the
//                tree, so a node's NIC carries one rank's bytes.
// `messages` is the most messages any one rank sends over the call (the per-message overhead term), where it differs
// from `steps` (a rank that sends to every other rank in one round); empty = one message per step.
// `mailbox` is, for an algorithm with a mailbox form (FindExchange), the block one rank posts in it: when the whole
// group is on one node over shm and the block fits kMailboxBlockBytes (runtime/common/mailbox_block.h), the call is
// that one exchange instead of its steps and messages. Empty = no mailbox form.
// `pulled` is, where it is less than `bytes`, the most bytes one rank receives when its peers read its messages by
// single copy (shm from the node's single-copy size on, runtime/transport/shm/shm_transport.h): each receiver copies
// straight from the sender's buffer, all of them at once, so a root that sends to every rank pays none of it. Its
// value is also the size of each such message. Empty = `bytes` whatever the link.
// `mean` is, where it is less than `bytes`, the bytes all ranks send together divided by p: a rooted algorithm's
// busiest rank (the root, a tree's inner ranks) moves more than the others, and a node's shared cores copy every
// rank's bytes, not p times the busiest's. Empty = `bytes` (every rank moves as much).
enum class Crossing : uint8_t { kEveryRank, kOnePerNode, kLevels, kDoubling, kTree };
struct AlgorithmCost {
  absl::string_view steps;
  absl::string_view bytes;
  Crossing across = Crossing::kEveryRank;
  absl::string_view messages = {};
  absl::string_view mailbox = {};
  absl::string_view pulled = {};
  absl::string_view mean = {};

  absl::string_view Messages() const { return messages.empty() ? steps : messages; }
};
// "one per node", "every rank", "levels", "doubling", "tree" (docs/ALGORITHMS.md's words).
absl::string_view CrossingName(Crossing c);
// The cost of `name` for `c`, or nullptr when the registry has no such algorithm.
const AlgorithmCost* Cost(Collective c, absl::string_view name);

// The tunable parameters of an algorithm, in canonical order (the catalogue's AlgorithmSpec::params).
std::vector<ParamKind> Params(absl::string_view name);

// OK when `algorithm` exists for `c` and is meaningful for this world size and topology; otherwise an error
// whose message says why (NotFound for an unknown name, listing the accepted ones; FailedPrecondition when the
// algorithm does not apply, e.g. hierarchical on one node). Every registered algorithm runs correctly on any
// world size >= 1; "not valid" means "pointless here", never "would break" — except `symmetric` (allreduce,
// allgather, reducescatter, broadcast), never valid here: it needs buffers in symmetric memory (it refuses others with
// InvalidArgument) and the communicator chooses it for those itself.
absl::Status IsValid(Collective c, absl::string_view algorithm, int world_size, const GroupTopology& topo);

// OK when `config`'s hierarchical form (HierForm) can run for `c` on `topo`: form=auto always; parallel or leader
// only for the algorithms that have both (hierarchical allgather and reducescatter), and parallel only when every
// node has as many ranks. Otherwise InvalidArgument naming the form and what is accepted here. Unlike IsValid,
// a refusal means the configuration cannot run as written.
absl::Status CheckForm(Collective c, const Configuration& config, const GroupTopology& topo);

// The algorithms for which IsValid() is OK, in registry order.
std::vector<std::string> ListValid(Collective c, int world_size, const GroupTopology& topo);

// Candidate values for the sweep.
std::vector<uint64_t> ChunkCandidates();  // 64K, 256K, 1M, 4M
std::vector<int> ChannelCandidates();     // 1, 2, 4

// Every configuration of `algorithm` the sweep should try: the cross product of the candidate values of its
// parameters, with `links` for the link parameter (empty = {auto}). For hierarchical: intra = its default step
// (ring; a collective without ring takes the selector's choice for it) on link=auto (shared memory inside a node),
// and inter on every link in {ring, halving_doubling, recursive_doubling} (allreduce), {ring, recursive_doubling,
// direct} (allgather), {ring, halving_doubling, direct} (reducescatter) or {binomial_tree, chain, linear}
// (broadcast), each with default chunk/channels; allgather and reducescatter each in form=parallel and form=leader
// (the caller drops what CheckForm refuses on its topology: parallel on uneven nodes).
std::vector<Configuration> Candidates(Collective c, absl::string_view algorithm, absl::Span<const LinkSpec> links);

// Checks the call (known algorithm for args.collective, op supported for the dtype, root in range, world size
// from topo.node_of) and runs the algorithm. The one entry point the communicator and RunSubCollective use.
absl::Status Run(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx);

}  // namespace registry
}  // namespace hccltune

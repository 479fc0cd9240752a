// `hccl-tune export --format openmpi-rules`: Open MPI's coll/tuned dynamic rules file from a table swept with
// `hccl-tune sweep --runtime openmpi`. Open MPI reads it at MPI_Init with
//
//   OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_dynamic_rules_filename=FILE
//
// (`hccl-tune env --runtime openmpi` prints those lines). The file has, per collective (allreduce, allgather, bcast,
// reduce_scatter_block), one block of message-size rules per communicator size the table has entries for, each
// rule "message-size algorithm-id fan-in/out segment-size" from the table's byte ranges (Open MPI counts the
// message as docs/CONVENTIONS.md counts bytes for these four collectives: the whole buffer, allgather's whole
// output, reduce_scatter_block's whole input). A range won by Open MPI's own choice gets algorithm 0: coll/tuned
// then uses its fixed rules.
//
// The fan-in/out field is 0 but for bcast's chain, which takes it as its number of chains: there it is
// kOpenMpiChainFanout, the value coll/tuned gives a forced chain (coll_tuned_bcast_algorithm_chain_fanout's
// default), with which the sweep measured it; 0 would make the chain a pipeline. A range whose winner beat Open
// MPI's own choice by less than 5% in the sweep keeps algorithm 0 (tuner/peer_export/peer_rules.h).
//
// Communicator sizes: Open MPI uses the block of the largest size at or below the communicator's, so a
// communicator between two measured sizes gets the smaller one's rules, and one above the largest the largest's.
// A first block for size 1 with algorithm 0 everywhere keeps Open MPI's fixed rules for communicators smaller
// than every measured size (without it they would get the smallest measured size's rules). Likewise each block
// starts at message size 0 with algorithm 0 when the table starts above 0.
//
// Comments carry no digits: older coll/tuned readers skip unknown characters but would read digits as numbers.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"

namespace hccltune::exporter {

// coll/tuned's default fan-out of a forced bcast chain (Open MPI 4: coll_tuned_bcast_algorithm_chain_fanout).
inline constexpr int kOpenMpiChainFanout = 4;

// Open MPI 4.x coll/tuned's id for a collective's algorithm name (the `coll_tuned_<coll>_algorithm` values);
// 0 for `default`; InvalidArgument naming the accepted names otherwise.
absl::StatusOr<int> OpenMpiAlgorithmId(Collective c, const std::string& algorithm);

// The rules file for `table` (a table of runtime openmpi-4.x). FailedPrecondition for another runtime or version,
// InvalidArgument for an entry Open MPI cannot express (another collective or dtype).
absl::StatusOr<std::string> OpenMpiRules(const db::Table& table);

}  // namespace hccltune::exporter

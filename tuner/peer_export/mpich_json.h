// `hccl-tune export --format mpich-json`: MPICH's collective-selection JSON files from a table swept with
// `hccl-tune sweep --runtime mpich`. MPICH 4.0 chooses a collective's algorithm at two levels, each from its own
// JSON tree, and reads both at MPI_Init:
//
//   MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE=FILE          the MPIR level: which MPIR_<Coll>_intra_* algorithm
//   MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE=FILE.ch4  the ch4 device level: which composition (for allreduce
//                                                            and bcast, the device's own shared-memory algorithms
//                                                            or the MPIR level)
//
// (`hccl-tune env --runtime mpich` prints those lines.) A file replaces MPICH's whole built-in tree of its level,
// and MPICH aborts on a collective its MPIR tree does not cover, so each file is MPICH's built-in tree (read from
// the installed libmpich, where it is compiled in) with the table's collectives' intra-communicator rules
// replaced:
//  - MPIR file, per collective: communicator size, then message size (allreduce and bcast: the buffer,
//    `avg_msg_size`; allgather and reduce_scatter_block: the whole output / input, `total_msg_size`: both as
//    docs/CONVENTIONS.md counts bytes). A range won by an algorithm names MPIR_<Coll>_intra_<algorithm>
//    (`nb`: MPIR_<Coll>_allcomm_nb); a range won by MPICH's own choice (`mpich:auto`), or by less than 5% over it
//    in the sweep (tuner/peer_export/peer_rules.h), gets the built-in rules.
//  - ch4 file, allreduce and bcast: a range won by an MPIR algorithm gets the composition that goes straight to
//    the MPIR level (allreduce beta, bcast gamma: the netmod's collective, MPIR_<Coll>_impl), a range won by
//    `mpich:auto` the built-in device rules (on one node: the shared-memory release_gather algorithms).
//    Allgather and reduce_scatter_block keep the built-in device rules, which go to the MPIR level.
// Ranges: each rule holds below its range's end, the last one for every larger size; sizes below the first
// measured range keep the built-in rules; communicator sizes: the
// rules of the largest measured size at or below the communicator's; a communicator smaller than every measured
// size (MPICH's own node communicators among them) keeps the built-in rules.
//
// Thread-safety: pure functions, except ReadMpichBuiltin (reads a file).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"

namespace hccltune::exporter {

// MPICH's built-in selection trees, as JSON text.
struct MpichBuiltin {
  std::string mpir;  // MPIR level (algorithm=MPIR_...)
  std::string ch4;   // ch4 device level (composition=MPIDI_...)
};

// The built-in trees compiled into `library` (libmpich.so). NotFound naming the library when it has none.
absl::StatusOr<MpichBuiltin> ReadMpichBuiltin(const std::string& library);

// The default library path: the first of the usual libmpich.so.12 locations that exists ("" when none does).
std::string DefaultMpichLibrary();

struct MpichJsonFiles {
  std::string mpir;  // for MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE
  std::string ch4;   // for MPIR_CVAR_CH4_COLL_SELECTION_TUNING_JSON_FILE
};

// Both files for `table` (a table of runtime mpich-4.x). FailedPrecondition for another runtime or version,
// InvalidArgument for an entry MPICH cannot express (another collective or dtype, another runtime's
// configuration) or built-in trees that do not parse.
absl::StatusOr<MpichJsonFiles> MpichJson(const db::Table& table, const MpichBuiltin& builtin);

}  // namespace hccltune::exporter

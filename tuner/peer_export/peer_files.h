// The files a peer runtime (Open MPI, MPICH) reads for one of its tables, where they are kept, and the environment
// that points the runtime at them. Used by `hccl-tune export` and by hccl-tuned, which keeps every peer table's
// files in its exports directory (daemon/peer_exports.h) for `hccl-tune env`.
//
// In a directory DIR, a table of fingerprint FP has:
//   Open MPI: DIR/FP.openmpi-rules                 (tuner/peer_export/openmpi_rules.h)
//   MPICH:    DIR/FP.mpich.json, DIR/FP.mpich.json.ch4 (tuner/peer_export/mpich_json.h)
//
// Thread-safety: pure functions, except the file writers and removers.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "db/tuning_store.h"
#include "tuner/peer_export/mpich_json.h"

namespace hccltune::exporter {

struct PeerFile {
  std::string path;
  std::string text;
};

// The files of `table` (a peer runtime's) in `dir`. `mpich` is needed for an MPICH table (FailedPrecondition
// without it). FailedPrecondition for a table of this runtime; the exporters' errors otherwise.
absl::StatusOr<std::vector<PeerFile>> PeerFiles(const db::Table& table, const std::string& dir,
                                                const MpichBuiltin* mpich);

// Every path PeerFiles may write for fingerprint `fp` in `dir`, for every peer runtime.
std::vector<std::string> PeerFilePaths(const std::string& dir, absl::string_view fp);

// The paths of the files `runtime` ("openmpi", "mpich") reads for fingerprint `fp` in `dir`; empty for another.
std::vector<std::string> RuntimeFilePaths(absl::string_view runtime, const std::string& dir, absl::string_view fp);

// The shell lines that point `runtime` ("openmpi", "mpich") at the files of fingerprint `fp` in `dir`:
// `export NAME='VALUE'` each. InvalidArgument for another runtime.
absl::StatusOr<std::vector<std::string>> PeerEnvLines(absl::string_view runtime, const std::string& dir,
                                                      absl::string_view fp);

// `file` gets `text` whole or not at all: a regular file (or a new one) is written to a temporary file beside it,
// synced and renamed over it, so a failed write leaves the old content; a device or pipe (/dev/stdout, a FIFO) is
// written in place. A symbolic link is followed (its target is replaced, the link stays).
absl::Status WriteFileAtomically(const std::string& file, absl::string_view text);

}  // namespace hccltune::exporter

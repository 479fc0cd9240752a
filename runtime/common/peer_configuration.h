// Configurations of peer runtimes: the algorithms of another MPI library that hccl-tune sweeps and exports
// (docs/CONVENTIONS.md, Peer runtimes). One text form, stored in the same tables as this runtime's own
// configurations but only ever under a topology whose fingerprint names that runtime:
//
//   openmpi:default                       Open MPI's own decision rules (coll/tuned, no forced algorithm)
//   openmpi:ring(segment=0)               coll/tuned algorithm "ring", no segmentation
//   openmpi:segmented_ring(segment=64K)   coll/tuned algorithm "segmented_ring", 64 KiB segments
//   mpich:auto                            MPICH's own selection
//   mpich:recursive_doubling              MPIR_CVAR_<COLL>_INTRA_ALGORITHM=recursive_doubling
//
// Algorithm names are the runtime's own enumerator names (Open MPI's `coll_tuned_<coll>_algorithm` values, MPICH's
// `MPIR_CVAR_<COLL>_INTRA_ALGORITHM` values), lower-cased with '-' written '_'. Every Open MPI algorithm but
// `default` carries its segment size (0 = none), printed with the largest exact binary suffix; MPICH
// configurations have no parameters. Which names a runtime version offers is the runtime's business: the sweep
// asks it, the store only checks the form.
//
// Thread-safety: pure functions and values.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hccltune {

inline constexpr char kOpenMpi[] = "openmpi";
inline constexpr char kMpich[] = "mpich";

struct PeerConfiguration {
  std::string runtime;    // "openmpi" or "mpich"
  std::string algorithm;  // the runtime's name; "default" (Open MPI) / "auto" (MPICH) = its own choice
  uint64_t segment = 0;   // Open MPI only: segment size in bytes, 0 = none

  // The canonical text form (above).
  std::string ToString() const;
  // Whether this is the runtime's own choice (no forced algorithm).
  bool IsDefault() const;
  // Errors name the text and what is wrong: an unknown runtime, a parameter MPICH does not take, a bad size.
  static absl::StatusOr<PeerConfiguration> Parse(absl::string_view text);
  // The runtime's own choice: openmpi:default, mpich:auto. InvalidArgument for another runtime.
  static absl::StatusOr<PeerConfiguration> Default(absl::string_view runtime);
};

// Whether `text` is written as a peer runtime's configuration ("name:..." before any parenthesis).
bool IsPeerConfiguration(absl::string_view text);
// The peer runtime a fingerprint's `runtime` field names ("openmpi-4.1" -> "openmpi"); "" for hccl-tune.
std::string PeerRuntimeName(absl::string_view fingerprint_runtime);
// Whether a topology's canonical JSON names this runtime (format 1 always does); false for a peer runtime's
// table or JSON that does not parse. Tables of peers are never served to, explored or re-swept by this runtime.
bool IsOwnRuntimeTopology(absl::string_view topology_json);
// The canonical form of either kind of configuration: this runtime's (Configuration) or a peer's.
absl::StatusOr<std::string> CanonicalConfigurationString(absl::string_view text);

}  // namespace hccltune

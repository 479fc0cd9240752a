// The node daemon's stored link measurement for a topology (hccltune.v1.Tuner GetLinks): what the link inspector
// reads when asked for stored results instead of measuring. One unary RPC to this rank's own daemon (found as
// docs/CONVENTIONS.md, Daemon discovery, says), with a deadline: local, not collective.
//
// Thread-safety: a pure function (it makes its own channel).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/config.h"

namespace hccltune {

struct StoredLinksReply {
  std::string links_json;  // the link inspector's table ({"ranks": N, "links": [...]})
  int64_t measured_unix_ms = 0;
  int64_t stored_unix_ms = 0;
  std::string daemon;  // the gRPC target that answered
};

// The daemon's newest link table for `fingerprint`. NotFound when it has none for this topology (naming the
// fingerprint and the daemon, and how to store one); Unavailable naming the target when no daemon answers (or
// FailedPrecondition when HCCL_TUNE_DAEMON=off); other gRPC failures with their code and message.
absl::StatusOr<StoredLinksReply> FetchStoredLinks(const Environment& env, const std::string& fingerprint,
                                                  absl::Duration timeout = absl::Seconds(5));

}  // namespace hccltune

// A communicator's flight recorder: its ring of recent calls (runtime/common/flight_ring.h) and the dumps of it
// as JSON files, one per communicator and rank (format: docs/TROUBLESHOOTING.md, The flight recorder). Dumps are
// written on an exec timeout and on a broken communicator (CommImpl::CallFailed), on request
// (Communicator::DumpFlightRecorder, DumpFlightRecorders), and on HCCL_TUNE_FR_SIGNAL.
//
// Thread-safety: the ring has one writer, the communicator's calling thread (under its call lock); Json and
// Dump read it from any thread at any time. Every recorder of the process is in one registry (a mutex, taken
// when a recorder is made or destroyed and by DumpFlightRecorders), so a dump of every recorder never reads
// one being destroyed. The signal handler only writes one byte to a pipe (write(2), async-signal-safe); a
// thread of its own reads it and dumps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/config.h"
#include "runtime/common/flight_ring.h"

namespace hccltune {

// Who the ring belongs to, for the dump.
struct FlightIdentity {
  int rank = 0;
  int size = 1;
  std::string name;  // the communicator's name
  uint64_t tag = 0;  // the instance tag, the same on every rank of the instance: names the dump files
  int64_t timeout_ms = 0;
};

class FlightRecorder {
 public:
  // A ring of env.fr_entries records (REQUIRES: > 0), registered for DumpFlightRecorders; dumps go to
  // FlightDumpDir(env).
  FlightRecorder(const Environment& env, FlightIdentity id);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  FlightRing& ring() { return ring_; }
  const FlightRing& ring() const { return ring_; }
  // The dump as JSON text. `reason`: timeout, abort, signal or request; `error`: the failure behind it, or "".
  std::string Json(absl::string_view reason, absl::string_view error) const;
  // Writes Json to <dir>/fr-<tag hex>-r<rank>.json (through a temporary file and a rename, so a reader never
  // sees half a dump; a later dump replaces it). Returns the path; an error names the path and errno's text.
  // FailedPrecondition when dumps are off (HCCL_TUNE_FR_DUMP_DIR=off).
  absl::StatusOr<std::string> Dump(absl::string_view reason, absl::string_view error = "") const;

 private:
  FlightRing ring_;
  FlightIdentity id_;
  std::string dir_;  // empty: dumps off
};

// Where dumps go: HCCL_TUNE_FR_DUMP_DIR, else $XDG_RUNTIME_DIR/hccl-tune/fr, else /tmp/hccl-tune-$UID/fr; empty
// when HCCL_TUNE_FR_DUMP_DIR is "off".
std::string FlightDumpDir(const Environment& env);

// Dumps every flight recorder of the process (reason "request" unless given); returns the paths written. The
// entry point for a dump requested from outside the call path (the daemon, a debugger, the signal thread).
absl::StatusOr<std::vector<std::string>> DumpFlightRecorders(absl::string_view reason = "request");

// Installs the HCCL_TUNE_FR_SIGNAL handler once per process (later calls with the same signal do nothing; a
// different signal is an error naming both).
absl::Status InstallFlightSignal(int signo);

}  // namespace hccltune

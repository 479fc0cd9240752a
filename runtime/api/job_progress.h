// A communicator's part in the job view (docs/TROUBLESHOOTING.md, "Running jobs"): the job id its heartbeats
// carry (docs/CONVENTIONS.md, Job id), its progress read from its flight recorder, and its dump on the daemon's
// request. The tuning client calls these from its own thread, never on the call path.
//
// Thread-safety: ReadProgress and DumpForDaemon read the recorder's ring, which any thread may read at any time
// (runtime/common/flight_ring.h); JobIdFor is a pure function.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/api/flight_recorder.h"
#include "runtime/common/config.h"
#include "runtime/selector/tuning.h"

namespace hccltune {

// The launcher's job id when there is one (Environment::launcher_job_id), else "store:<rendezvous>#<tag hex>" (the
// rendezvous store's address: HCCL_TUNE_STORE, HCCL_TUNE_MASTER_ADDR:PORT, MASTER_ADDR:MASTER_PORT), else
// "comm:<tag hex>" (a store the program made itself).
std::string JobIdFor(const Environment& env, uint64_t tag);

// The newest started and completed calls of `recorder` (null: recorder_off).
CommProgress ReadProgress(const FlightRecorder* recorder, const std::string& name, uint64_t tag, int rank, int size);

// Writes the recorder's local dump (reason "request", as DumpFlightRecorders does; skipped when dumps are off) and
// returns its text for the daemon; an error (null recorder) says the recorder is off.
FlightDumpText DumpForDaemon(const FlightRecorder* recorder, uint64_t tag, int rank);

}  // namespace hccltune

// A communicator's flight recorder: its ring of recent calls (runtime/common/flight_ring.h) and the dumps of it
// as JSON files, one per communicator and rank (format: docs/TROUBLESHOOTING.md, The flight recorder). Dumps are
// written on an exec timeout and on a broken communicator (CommImpl::CallFailed), on request
// (Communicator::DumpFlightRecorder, DumpFlightRecorders), and on HCCL_TUNE_FR_SIGNAL.
//
// Besides the ring, a dump carries what `hccl-tune doctor` needs to explain a slow job (docs/TROUBLESHOOTING.md):
// the topology fingerprint and the rank's node, the settings in force (HCCL_ALGO, HCCL_TUNE_ALGO,
// HCCL_BUFFSIZE), the process's CPU affinity, the node's online CPUs and the process's CPU time (read at the
// dump), per call-size bucket the calls whose scratch need exceeded HCCL_BUFFSIZE (NoteOverflow), and the links
// used: per network the bytes this rank sent and the peers and nodes reached (links(), runtime/transport/link_usage.h),
// this node's interfaces and the rank table's device_ip/host_nic_ip for this rank (flight_links.cc).
//
// Thread-safety: the ring and the overflow counts have one writer, the communicator's calling thread (under its
// call lock); Json and Dump read them from any thread at any time (the counts are relaxed atomics: a dump may
// see a count one call behind its maximum). SetJobFacts takes a mutex that Json takes too. Every recorder of the
// process is in one registry (a mutex, taken when a recorder is made or destroyed and by DumpFlightRecorders), so a
// dump of every recorder never reads one being destroyed. links() is LinkUsage's contract (Add from the calling
// thread, read lock-free by Json). The signal handler only writes one byte to a pipe (write(2),
// async-signal-safe); a thread of its own reads it and dumps.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/config.h"
#include "runtime/common/flight_ring.h"
#include "runtime/transport/link_usage.h"

namespace hccltune {

// Who the ring belongs to, for the dump.
struct FlightIdentity {
  int rank = 0;
  int size = 1;
  std::string name;  // the communicator's name
  uint64_t tag = 0;  // the instance tag, the same on every rank of the instance: names the dump files
  int64_t timeout_ms = 0;
};

// Facts about the job known once the communicator's topology is (after the rank exchange).
struct FlightJobFacts {
  std::string fingerprint;  // the topology fingerprint (16 hex digits), the key of its tuned table
  std::string node;         // the rank's node id (ranks with the same one share a node)
  int local_ranks = 1;      // the communicator's ranks on this node
  int nodes = 1;
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
  // Called once the topology is known; a dump before it has empty facts.
  void SetJobFacts(FlightJobFacts facts);
  // Writer: call `op` of `call_bytes` needs `need` bytes of scratch, more than HCCL_BUFFSIZE (HCCL's "fallback to
  // malloc"). A call noted several times counts once; its bucket keeps the largest need.
  void NoteOverflow(uint32_t op, uint64_t call_bytes, uint64_t need);
  const FlightRing& ring() const { return ring_; }
  // The pairs the communicator's endpoints attached (EndpointCache::SetLinkUsage), for "links_used".
  LinkUsage& links() { return links_; }
  // The dump as JSON text. `reason`: timeout, abort, signal or request; `error`: the failure behind it, or "".
  std::string Json(absl::string_view reason, absl::string_view error) const;
  // Writes Json to <dir>/fr-<tag hex>-r<rank>.json (through a temporary file and a rename, so a reader never
  // sees half a dump; a later dump replaces it). Returns the path; an error names the path and errno's text.
  // FailedPrecondition when dumps are off (HCCL_TUNE_FR_DUMP_DIR=off).
  absl::StatusOr<std::string> Dump(absl::string_view reason, absl::string_view error = "") const;

 private:
  // Calls over HCCL_BUFFSIZE, by bucket: the call's size has bit width `index` (bucket [2^(i-1), 2^i); 0: 0 B).
  struct Overflow {
    uint32_t last_op = 0;  // writer only
    std::atomic<uint64_t> calls{0}, max_need{0};
  };
  std::string SettingsJson() const;
  std::string HostJson() const;
  std::string OverflowJson() const;
  std::string LinksJson() const;  // flight_links.cc

  FlightRing ring_;
  FlightIdentity id_;
  std::string dir_;  // empty: dumps off
  std::string hccl_algo_, tune_algo_;
  uint64_t buffsize_bytes_ = 0;
  std::string device_ip_, host_nic_ip_;  // the rank table's for this rank ("" without one)
  LinkUsage links_;
  int64_t created_ns_ = 0;  // steady clock at construction
  std::array<Overflow, 65> overflow_;
  mutable std::mutex facts_mu_;
  FlightJobFacts facts_;  // guarded by facts_mu_
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

// `hccl-tune doctor --dump DIR`: findings from a directory of flight-recorder dumps (docs/TROUBLESHOOTING.md,
// "hccl-tune doctor"), along HCCL's troubleshooting chain:
//   (a) exposure: each rank's share of time blocked inside collectives (info: whether the rest matters);
//   (b) algorithm: the configuration each call size ran against the tuned table's winner and the best measured
//       (with a store), flagging an override (HCCL_TUNE_ALGO, HCCL_ALGO), a call's own choice or a default that
//       costs more than 10%; without a table an override is still named;
//   (c) links: cross-node bytes per network against the fastest network between the nodes (measured by
//       `hccl-tune links` when the store has its table, else the interfaces' speed), and the rank table's
//       device_ip/host_nic_ip against the interfaces used;
//   (d) buffers: calls whose scratch need exceeded HCCL_BUFFSIZE, and the size that avoids it;
//   (e) binding: ranks of a node pinned to the same CPUs, or more ranks than CPUs on a node;
//   (f) straggler: one rank consistently last to arrive (its local durations shortest), by how much;
//   (g) a hang's wavefront — the operation the waiting ranks are in and the ranks that never entered it, or ranks
//       that called a different collective or size at the same operation.
// Each finding carries its evidence and its fix; they come most costly first: errors (a hang, a mismatch) before
// warnings before info, then by estimated seconds lost.
//
// Thread-safety: pure functions over dumps read once; the store (when given) is only read.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"

namespace hccltune::doctor {

enum class Severity { kInfo = 0, kWarn = 1, kError = 2 };
const char* SeverityName(Severity s);  // "info", "warn", "error"

struct Finding {
  Severity severity = Severity::kInfo;
  // "hang", "mismatch", "algorithm", "override", "links", "buffers", "binding", "straggler", "exposure", "summary"
  std::string kind;
  double cost = 0;  // ordering within a severity: estimated seconds lost (errors: 2 mismatch, 1 hang)
  std::string title;
  std::vector<std::string> evidence;
  std::string fix;
};

struct DoctorOptions {
  double hang_after_s = 5;
  // Tuned tables and their sweeps for (b), stored link tables for (c); null: only overrides are named, and (c)
  // knows only the interfaces' speeds. Tables are keyed by the dumps'
  // topology fingerprint and world size.
  db::TuningStore* store = nullptr;
  std::string store_name;  // how findings name it ("database t.db", "daemon unix:/...")
};

// One dump as text (a file's content, or one collected through the daemon) and the name errors give it.
struct DumpText {
  std::string name, text;
};

// Diagnoses every communicator (the dumps of one comm_tag) in `dumps`. Errors: no dump, a text that is not a
// dump (naming it and what is wrong).
absl::StatusOr<std::vector<Finding>> DiagnoseDumps(const std::vector<DumpText>& dumps, const DoctorOptions& options);

// Reads every fr-*-r*.json in `dir` and diagnoses each communicator (the files of one comm_tag) in it. A rank
// is stuck in a call that failed (a timeout, an abort) or that was blocked at least `hang_after_s` before its dump
// (ranks of a healthy job wait in collectives for each other all the time). Errors: a directory that cannot be
// read, one with no dump (naming the directory and the pattern), a file that is not a dump (naming the file and
// what is wrong).
absl::StatusOr<std::vector<Finding>> DiagnoseDumpDir(const std::string& dir, double hang_after_s = 5);
absl::StatusOr<std::vector<Finding>> DiagnoseDumpDir(const std::string& dir, const DoctorOptions& options);

// The findings as text: one numbered block per finding (title, evidence lines, fix).
std::string FormatFindings(const std::vector<Finding>& findings);

}  // namespace hccltune::doctor

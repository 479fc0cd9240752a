// `hccl-tune doctor --dump DIR`: findings from a directory of flight-recorder dumps (docs/TROUBLESHOOTING.md,
// "hccl-tune doctor"): (g) a hang's wavefront — the operation the waiting ranks are in and the ranks that never
// entered it, or ranks that called a different collective or size at the same operation — and (b) calls whose
// configuration an override forced (HCCL_TUNE_ALGO, HCCL_ALGO). Each finding carries its evidence and its fix;
// they come most costly first: errors (a hang, a mismatch) before warnings, then by estimated time.
//
// Thread-safety: pure functions over files read once.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace hccltune::doctor {

enum class Severity { kInfo = 0, kWarn = 1, kError = 2 };
const char* SeverityName(Severity s);  // "info", "warn", "error"

struct Finding {
  Severity severity = Severity::kInfo;
  std::string kind;  // "hang", "mismatch", "override", "summary"
  double cost = 0;   // ordering within a severity: estimated seconds, or calls affected
  std::string title;
  std::vector<std::string> evidence;
  std::string fix;
};

// Reads every fr-*-r*.json in `dir` and diagnoses each communicator (the files of one comm_tag) in it. A rank
// is stuck in a call that failed (a timeout, an abort) or that was blocked at least `hang_after_s` before its dump
// (ranks of a healthy job wait in collectives for each other all the time). Errors: a directory that cannot be
// read, one with no dump (naming the directory and the pattern), a file that is not a dump (naming the file and
// what is wrong).
absl::StatusOr<std::vector<Finding>> DiagnoseDumpDir(const std::string& dir, double hang_after_s = 5);

// The findings as text: one numbered block per finding (title, evidence lines, fix).
std::string FormatFindings(const std::vector<Finding>& findings);

}  // namespace hccltune::doctor

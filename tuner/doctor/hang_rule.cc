// (g) a hang's wavefront and a mismatch of calls between ranks (tuner/doctor/rules.h).
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tuner/doctor/rules.h"

namespace hccltune::doctor {
namespace {

std::string Describe(const Entry& e) {
  return absl::StrCat(e.collective, " of ", Size(e.bytes), " running ",
                      e.config.empty() ? "no configuration" : e.config, e.source.empty() ? "" : " (", e.source,
                      e.source.empty() ? "" : ")");
}

// What one rank of a hang did, relative to operation k.
std::string HangEvidence(const RankDump& d, uint32_t k) {
  const Entry* p = d.Pending();
  const std::string head =
      absl::StrCat("rank ", d.rank, " (", d.path, ", dumped on ", d.reason, "): last completed ", d.last_completed);
  if (p != nullptr && p->seq == k) {
    const std::string since =
        p->blocked_ns != 0 && d.dump_time_ns > p->blocked_ns
            ? absl::StrCat(", blocked ", Fixed((d.dump_time_ns - p->blocked_ns) / 1e9), " s before its dump")
            : "";
    return absl::StrCat(head, "; waiting in operation ", k, ", ", Describe(*p), since);
  }
  if (d.LastEntered() < k) {
    const auto last = d.ops.find(d.LastEntered());
    return absl::StrCat(head, "; never entered operation ", k,
                        last == d.ops.end() ? std::string()
                                            : absl::StrCat(" (last entered ", last->first, ", ", Describe(last->second),
                                                           ", ", last->second.state, ")"));
  }
  return absl::StrCat(head, "; entered operation ", k, " and went on to ", d.LastEntered());
}

}  // namespace

std::optional<Finding> DiagnoseHang(const Comm& comm, double hang_after_s) {
  uint32_t k = 0;
  const Entry* at = nullptr;
  for (const RankDump& d : comm) {
    const Entry* p = d.Pending(static_cast<int64_t>(hang_after_s * 1e9));
    if (p != nullptr && p->seq >= k) {
      k = p->seq;
      at = p;
    }
  }
  if (at == nullptr) return std::nullopt;
  const int world = comm.front().world;
  std::vector<int> behind;
  std::set<int> present;
  Finding f;
  f.severity = Severity::kError;
  f.kind = "hang";
  f.cost = 1;
  for (const RankDump& d : comm) {
    present.insert(d.rank);
    if (d.LastEntered() < k) behind.push_back(d.rank);
    f.evidence.push_back(HangEvidence(d, k));
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (present.count(r) == 0) missing.push_back(r);
  }
  if (!missing.empty()) {
    f.evidence.push_back(absl::StrCat(RankList(missing), ": no dump (a stopped, stuck or dead process writes none)"));
  }
  std::vector<int> suspects = behind;
  suspects.insert(suspects.end(), missing.begin(), missing.end());
  std::sort(suspects.begin(), suspects.end());
  const std::string op = absl::StrCat("operation ", k, " (", at->collective, " of ", Size(at->bytes), ")");
  if (suspects.empty()) {
    f.title = absl::StrCat("hang at ", op, ": every rank entered it");
    f.fix =
        "every rank is in the same call: look for a lost link or a peer that cannot make progress (the "
        "dumps' error fields), and rerun with HCCL_TUNE_LOG_LEVEL=debug";
  } else {
    f.title = absl::StrCat("hang at ", op, ": ", RankList(suspects), " never entered it");
    f.fix = absl::StrCat("see what ", RankList(suspects),
                         " is doing (py-spy dump --pid PID, gdb -p PID; HCCL_TUNE_FR_SIGNAL=SIGUSR1 and kill -USR1 "
                         "PID for its dump): stopped, stuck in compute or I/O, or it skipped a collective the "
                         "others made. HCCL_EXEC_TIMEOUT bounds how long the others wait");
  }
  return f;
}

namespace {

// The call's identity across ranks: its collective and size (alltoallv's sizes differ by rank).
std::string CallKey(const Entry& e) {
  return e.collective == "alltoallv" ? e.collective : absl::StrCat(e.collective, " of ", Size(e.bytes));
}

}  // namespace

std::optional<Finding> DiagnoseMismatch(const Comm& comm) {
  std::set<uint32_t> seqs;
  for (const RankDump& d : comm) {
    for (const auto& [seq, e] : d.ops) seqs.insert(seq);
  }
  for (uint32_t k : seqs) {
    std::map<std::string, std::vector<int>> by_call;
    for (const RankDump& d : comm) {
      auto it = d.ops.find(k);
      if (it != d.ops.end() && !it->second.config.empty()) by_call[CallKey(it->second)].push_back(d.rank);
    }
    if (by_call.size() < 2) continue;
    Finding f;
    f.severity = Severity::kError;
    f.kind = "mismatch";
    f.cost = 2;  // the cause of the hang it brings, so before it
    std::vector<std::string> calls;
    for (const auto& [call, ranks] : by_call) {
      f.evidence.push_back(absl::StrCat(RankList(ranks), ": operation ", k, " is ", call));
      calls.push_back(call);
    }
    f.title =
        absl::StrCat("the ranks called different collectives at operation ", k, ": ", absl::StrJoin(calls, " / "));
    f.fix =
        "every rank must make the same collective calls in the same order with the same sizes: find where the "
        "program's ranks take different paths before this call (a condition on the rank, data-dependent "
        "shapes, a skipped step)";
    return f;
  }
  return std::nullopt;
}

}  // namespace hccltune::doctor

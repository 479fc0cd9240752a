// (a) exposure and (f) straggler, from each rank's timed calls (tuner/doctor/rules.h). Only local durations are
// compared: a call's start and end come from one rank's clock; clocks of different hosts are never compared.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tuner/doctor/rules.h"

namespace hccltune::doctor {
namespace {

constexpr double kBound = 0.30;       // a communication share above this is communication bound
constexpr double kLastShare = 0.75;   // a straggler arrives last at least this often
constexpr double kMinLateS = 200e-6;  // ... at least this late (a tight loop of small calls phase-locks: one rank
                                      // stays a few tens of microseconds behind) ...
constexpr double kLateOfWait = 0.5;   // ... and the others spend at least this share of their call waiting
constexpr double kWarnLoss = 0.05;    // a straggler costing this share of the span is a warning
constexpr int kMinCommonCalls = 4;    // calls timed on every rank needed to judge

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Per operation timed (and completed) on every dumped rank: each rank's local duration in seconds, by rank index.
std::map<uint32_t, std::vector<double>> CommonTimedCalls(const Comm& comm) {
  std::map<uint32_t, std::vector<double>> out;
  for (const auto& [seq, e] : comm.front().ops) {
    std::vector<double> d;
    for (const RankDump& r : comm) {
      auto it = r.ops.find(seq);
      if (it == r.ops.end() || !it->second.timed() || it->second.state != "completed") break;
      d.push_back(static_cast<double>(it->second.end_ns - it->second.start_ns) / 1e9);
    }
    if (d.size() == comm.size()) out[seq] = std::move(d);
  }
  return out;
}

}  // namespace

// (a) Exposed communication: the share of a rank's time its calling thread is blocked inside collective calls,
// between the start of its first timed call and the end of its last (dump_model.h, TimeInCalls). Communication
// that overlaps compute on another thread is not seen as blocking the caller only where the caller does not wait
// for it: a non-blocking call run by the progress thread counts as that thread's time in the call.
std::optional<Finding> DiagnoseExposure(const Comm& comm) {
  Finding f;
  f.kind = "exposure";
  double lo = 1, hi = 0;
  for (const RankDump& d : comm) {
    const CommTime t = TimeInCalls(d);
    if (t.timed < 2) continue;
    lo = std::min(lo, t.share);
    hi = std::max(hi, t.share);
    f.evidence.push_back(absl::StrCat("rank ", d.rank, ": ", t.calls, " calls in the ", Duration(t.span_s),
                                      " between its first and last timed call; ", t.timed, " timed, mean ",
                                      Duration(t.mean_ms / 1e3), ": about ", Duration(t.busy_s), " blocked in calls (",
                                      Fixed(t.share * 100, 0), "%)"));
  }
  if (f.evidence.empty()) return std::nullopt;
  const std::string range = Fixed(lo * 100, 0) == Fixed(hi * 100, 0)
                                ? absl::StrCat(Fixed(hi * 100, 0), "%")
                                : absl::StrCat(Fixed(lo * 100, 0), "-", Fixed(hi * 100, 0), "%");
  const bool bound = hi > kBound;
  f.title = absl::StrCat("ranks spend ", range, " of their time blocked in collectives: ",
                         bound ? "communication bound (over 30%)" : "not communication bound (30% or less)");
  f.fix = bound ? "communication limits this job: the findings above say where its time goes; where none does, "
                  "overlap communication with compute (bucketed, non-blocking collectives) or communicate less"
                : "communication is not what limits this job: look at its compute";
  return f;
}

// (f) Straggler. At a call every rank finishes at about the same moment (a collective completes when the last
// rank's data arrives), so the rank that arrives last has the shortest local duration, and the others' durations
// exceed its own by about how late it came. Per operation timed on every rank, the rank with the shortest
// duration is the last to arrive and (median of the others' durations - its own) its lateness. A rank last at
// kLastShare of those calls, kMinLateS late (median) and making the others wait at least kLateOfWait of their call
// is a straggler; what it costs: its lateness x the calls between the first and last timed call.
std::optional<Finding> DiagnoseStraggler(const Comm& comm) {
  if (comm.size() < 2) return std::nullopt;
  const auto calls = CommonTimedCalls(comm);
  if (calls.size() < static_cast<size_t>(kMinCommonCalls)) return std::nullopt;
  std::vector<int> last_count(comm.size(), 0);
  std::vector<std::vector<double>> late(comm.size()), own(comm.size()), others(comm.size());
  for (const auto& [seq, d] : calls) {
    const size_t last = static_cast<size_t>(std::min_element(d.begin(), d.end()) - d.begin());
    std::vector<double> rest;
    for (size_t i = 0; i < d.size(); ++i) {
      if (i != last) rest.push_back(d[i]);
    }
    ++last_count[last];
    late[last].push_back(Median(rest) - d[last]);
    own[last].push_back(d[last]);
    others[last].push_back(Median(rest));
  }
  const size_t s = static_cast<size_t>(std::max_element(last_count.begin(), last_count.end()) - last_count.begin());
  const double share = static_cast<double>(last_count[s]) / static_cast<double>(calls.size());
  const double lateness = Median(late[s]), wait = Median(others[s]);
  if (share < kLastShare || lateness < kMinLateS || lateness < kLateOfWait * wait) return std::nullopt;
  const CommTime t = TimeInCalls(comm[s]);
  const double n = static_cast<double>(t.calls > 0 ? t.calls : calls.size());
  // The others cannot have waited longer than they were blocked in calls.
  std::vector<double> others_busy;
  for (size_t i = 0; i < comm.size(); ++i) {
    if (i != s) others_busy.push_back(TimeInCalls(comm[i]).busy_s);
  }
  Finding f;
  f.kind = "straggler";
  f.cost = Median(others_busy) > 0 ? std::min(lateness * n, Median(others_busy)) : lateness * n;
  f.severity = t.span_s > 0 && f.cost < kWarnLoss * t.span_s ? Severity::kInfo : Severity::kWarn;
  const int rank = comm[s].rank;
  f.title = absl::StrCat("rank ", rank, " arrives last at ", last_count[s], " of ", calls.size(),
                         " calls timed on every rank, about ", Duration(lateness), " late: about ", Duration(f.cost),
                         " of waiting for it");
  f.evidence.push_back(absl::StrCat("at those calls rank ", rank, "'s own duration was ", Duration(Median(own[s])),
                                    " (median), the others' ", Duration(wait),
                                    ": they wait for it (the last rank to arrive waits least)"));
  for (size_t i = 0; i < comm.size(); ++i) {
    if (i != s) f.evidence.push_back(absl::StrCat("rank ", comm[i].rank, ": last at ", last_count[i], " calls"));
  }
  if (t.calls > 0) {
    f.evidence.push_back(absl::StrCat(t.calls, " calls between rank ", rank, "'s first and last timed call, in ",
                                      Duration(t.span_s), ": its lateness costs about ",
                                      Fixed(f.cost / t.span_s * 100, 0), "% of that"));
  }
  f.fix = absl::StrCat("see what rank ", rank, " does between collectives (py-spy dump --pid PID, perf top -p PID): ",
                       "more work or data than the others (an uneven split, rank-", rank,
                       "-only logging, checkpointing or I/O), a slower or busier host or device (its node: ",
                       comm[s].host.empty() ? comm[s].Where() : comm[s].host,
                       "), or CPU contention (see the binding finding)");
  return f;
}

}  // namespace hccltune::doctor

#include "tuner/bench/job_verdict.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace hccltune::bench {
namespace {

bool DiedWithoutWord(const RankEnd& r) { return r.failure_order >= 0 && !r.report; }

// What the rank was doing when it had to be ended.
std::string StateText(char state) {
  switch (state) {
    case 'T': return "was stopped (SIGSTOP or job control)";
    case 't': return "was stopped by a debugger (ptrace)";
    case 'D': return "was blocked in the kernel (uninterruptible sleep: a hung driver or I/O)";
    case 'R':
    case 'S': return "was still running but not taking part";
    default: return "was still there";
  }
}

std::string Fate(const RankEnd& r, absl::Duration grace) {
  const int st = r.wait_status;
  if (r.signal_sent != 0) {
    const std::string how = WIFSIGNALED(st) ? absl::StrCat("ended by ", SignalName(WTERMSIG(st)))
                                            : absl::StrCat("ended (exit status ", WEXITSTATUS(st), ")");
    return absl::StrCat(r.failure_order < 0 ? StateText(r.state) : "failed", " and was ", how, " after the ",
                        absl::FormatDuration(grace), " grace period");
  }
  if (WIFSIGNALED(st)) return absl::StrCat("was killed by ", SignalName(WTERMSIG(st)));
  if (r.report) return absl::StrCat("failed (exit status ", WEXITSTATUS(st), ")");
  return absl::StrCat("exited with status ", WEXITSTATUS(st));
}

// The rank `i`'s report blames, or -1 (none, itself, out of range).
int PeerOf(const std::vector<RankEnd>& ranks, size_t i) {
  const auto& rep = ranks[i].report;
  if (!rep || !rep->peer || *rep->peer == ranks[i].rank || *rep->peer < 0 ||
      *rep->peer >= static_cast<int>(ranks.size())) {
    return -1;
  }
  return *rep->peer;
}

// Where a chain of blame that starts at `peer` ends: a rank that blames nobody itself (rank 2 waited for rank 0,
// which waited for the frozen rank 1: rank 1). A cycle ends at the rank where it closes.
size_t RootOf(const std::vector<RankEnd>& ranks, size_t peer) {
  std::vector<bool> seen(ranks.size(), false);
  while (!seen[peer]) {
    seen[peer] = true;
    const int next = PeerOf(ranks, peer);
    if (next < 0) break;
    peer = static_cast<size_t>(next);
  }
  return peer;
}

// The first rank the spawner found stopped (SIGSTOP, job control, a debugger) and ended, having said nothing;
// ranks.size() when none.
size_t FirstStopped(const std::vector<RankEnd>& ranks) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankEnd& r = ranks[i];
    if (r.signal_sent != 0 && r.failure_order < 0 && !r.report && (r.state == 'T' || r.state == 't')) return i;
  }
  return ranks.size();
}

// Index of the blamed rank in `ranks` (see the header), and the indices of the ranks that blamed it, directly or
// through a rank that blamed it.
size_t Blamed(const std::vector<RankEnd>& ranks, std::vector<size_t>* accusers) {
  std::map<size_t, std::vector<size_t>> by_root;  // root of the blame chain -> reporting ranks
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int peer = PeerOf(ranks, i);
    if (peer < 0) continue;
    const size_t root = RootOf(ranks, static_cast<size_t>(peer));
    if (root != i) by_root[root].push_back(i);
  }
  auto earliest = [&](const std::vector<size_t>& v) {
    int best = INT32_MAX;
    for (size_t i : v) best = std::min(best, ranks[i].failure_order < 0 ? INT32_MAX : ranks[i].failure_order);
    return best;
  };
  if (!by_root.empty()) {
    auto best = by_root.begin();
    for (auto it = by_root.begin(); it != by_root.end(); ++it) {
      if (it->second.size() > best->second.size() ||
          (it->second.size() == best->second.size() && earliest(it->second) < earliest(best->second))) {
        best = it;
      }
    }
    // Blame that closes on ranks which ran and said why they failed, while another rank sat stopped: the ranks
    // waited on each other around the stopped one (rank 0 timed out on rank 2, which was waiting for the stopped
    // rank 1 and then relayed rank 0's abort). The stopped rank is the cause; every reporting rank failed for it.
    const size_t stopped = FirstStopped(ranks);
    if (stopped < ranks.size() && static_cast<size_t>(best->first) != stopped && ranks[best->first].report) {
      accusers->clear();
      for (size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i].report && i != stopped) accusers->push_back(i);
      }
      return stopped;
    }
    *accusers = best->second;
    return best->first;
  }
  auto first = [&](auto pred) {
    size_t pick = ranks.size();
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (!pred(ranks[i])) continue;
      if (pick == ranks.size() || ranks[i].failure_order < ranks[pick].failure_order) pick = i;
    }
    return pick;
  };
  size_t pick = first(DiedWithoutWord);
  if (pick == ranks.size()) {
    // Ended by the spawner (failure_order -1): the lowest rank; a stopped or blocked one first.
    for (size_t i = 0; i < ranks.size() && pick == ranks.size(); ++i) {
      if (ranks[i].signal_sent != 0 && ranks[i].failure_order < 0 && !ranks[i].report &&
          (ranks[i].state == 'T' || ranks[i].state == 't' || ranks[i].state == 'D')) {
        pick = i;
      }
    }
    for (size_t i = 0; i < ranks.size() && pick == ranks.size(); ++i) {
      if (ranks[i].signal_sent != 0 && ranks[i].failure_order < 0 && !ranks[i].report) pick = i;
    }
  }
  if (pick == ranks.size()) pick = first([](const RankEnd& r) { return r.failure_order >= 0; });
  return pick == ranks.size() ? 0 : pick;
}

}  // namespace

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev == nullptr ? absl::StrCat("signal ", sig) : absl::StrCat("signal ", sig, " (SIG", abbrev, ")");
}

std::optional<RankReport> ParseRankReport(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("message") || !j["message"].is_string()) return std::nullopt;
  RankReport r;
  r.message = j["message"].get<std::string>();
  if (j.contains("code") && j["code"].is_string()) r.code = j["code"].get<std::string>();
  if (j.contains("peer") && j["peer"].is_number_integer()) r.peer = j["peer"].get<int>();
  return r;
}

absl::Status JobVerdict(const std::vector<RankEnd>& ranks, absl::Duration grace) {
  if (ranks.empty()) return absl::InternalError("a job without ranks failed");
  std::vector<size_t> accusers;
  const size_t b = Blamed(ranks, &accusers);
  const RankEnd& blamed = ranks[b];
  std::string msg = absl::StrCat("rank ", blamed.rank, " (pid ", blamed.pid, ") ", Fate(blamed, grace));
  if (blamed.report) absl::StrAppend(&msg, ": ", blamed.report->message);
  if (!accusers.empty()) {
    // Quoted: a rank that saw it itself (not relaying another rank's announcement, ABORTED), the earliest.
    auto relayed = [&](size_t i) { return ranks[i].report->code == "ABORTED"; };
    std::sort(accusers.begin(), accusers.end(), [&](size_t x, size_t y) {
      return std::make_pair(relayed(x), ranks[x].failure_order) < std::make_pair(relayed(y), ranks[y].failure_order);
    });
    const RankEnd& first = ranks[accusers.front()];
    std::vector<int> names;
    for (size_t i : accusers) names.push_back(ranks[i].rank);
    std::sort(names.begin(), names.end());
    absl::StrAppend(&msg, "; ", names.size() == 1 ? "rank " : "ranks ", absl::StrJoin(names, ", "),
                    " failed because of it, rank ", first.rank, " saying: ", first.report->message);
  }
  return absl::AbortedError(msg);
}

}  // namespace hccltune::bench

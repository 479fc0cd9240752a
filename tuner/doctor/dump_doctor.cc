#include "tuner/doctor/dump_doctor.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/sizes.h"

namespace hccltune::doctor {
namespace {

// One record of a dump, as the doctor reads it.
struct Entry {
  uint32_t seq = 0;
  std::string collective, config, source, state;
  uint64_t bytes = 0;
  int64_t blocked_ns = 0;   // 0: never seen blocked
  double duration_ms = -1;  // < 0: not timed
};

// One rank's dump of one communicator.
struct RankDump {
  std::string path, tag, reason, error;
  int rank = 0, world = 0;
  int64_t last_completed = -1, dump_time_ns = 0;
  std::map<uint32_t, Entry> ops;  // by operation number
  // The call this rank is stuck in: its newest record not completed that failed, or was blocked at least
  // `min_blocked_ns` before the dump.
  const Entry* Pending(int64_t min_blocked_ns = 0) const {
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      const Entry& e = it->second;
      if (e.state == "completed") return nullptr;
      if (e.state == "failed" || (e.blocked_ns != 0 && dump_time_ns - e.blocked_ns >= min_blocked_ns)) return &e;
    }
    return nullptr;
  }
  uint32_t LastEntered() const { return ops.empty() ? 0 : ops.rbegin()->first; }
};

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": not a flight-recorder dump: ", what));
}

absl::StatusOr<RankDump> LoadDump(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Bad(path, "not JSON");
  if (j.value("version", "") != "hccl-tune-fr-1") return Bad(path, "no \"version\": \"hccl-tune-fr-1\"");
  RankDump d;
  d.path = path;
  try {
    d.tag = j.at("comm_tag").get<std::string>();
    d.reason = j.at("reason").get<std::string>();
    d.error = j.value("error", "");
    d.rank = j.at("rank").get<int>();
    d.world = j.at("world_size").get<int>();
    d.last_completed = j.at("last_completed_seq").get<int64_t>();
    d.dump_time_ns = j.value("dump_time_ns", int64_t{0});
    for (const nlohmann::json& e : j.at("entries")) {
      Entry x;
      x.seq = e.at("collective_seq_id").get<uint32_t>();
      x.collective = e.at("collective").get<std::string>();
      x.bytes = e.at("bytes").get<uint64_t>();
      x.config = e.at("configuration").get<std::string>();
      x.source = e.at("source").get<std::string>();
      x.state = e.at("state").get<std::string>();
      if (e.contains("time_blocked_ns") && !e["time_blocked_ns"].is_null()) x.blocked_ns = e["time_blocked_ns"];
      if (e.contains("duration_ms") && !e["duration_ms"].is_null()) x.duration_ms = e["duration_ms"];
      d.ops[x.seq] = x;
    }
  } catch (const nlohmann::json::exception& e) {
    return Bad(path, e.what());
  }
  if (d.world < 1 || d.rank < 0 || d.rank >= d.world) return Bad(path, "rank outside 0..world_size-1");
  return d;
}

// A size as docs/CONVENTIONS.md writes it (1K, 64M), plain bytes with a unit below 1 KiB or off a binary suffix.
std::string Size(uint64_t bytes) {
  return bytes > 0 && bytes % 1024 == 0 ? FormatBytes(bytes) : absl::StrCat(bytes, " B");
}

std::string Describe(const Entry& e) {
  return absl::StrCat(e.collective, " of ", Size(e.bytes), " running ",
                      e.config.empty() ? "no configuration" : e.config, e.source.empty() ? "" : " (", e.source,
                      e.source.empty() ? "" : ")");
}

// Seconds with one decimal.
std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

// What one rank of a hang did, relative to operation k.
std::string HangEvidence(const RankDump& d, uint32_t k) {
  const Entry* p = d.Pending();
  const std::string head =
      absl::StrCat("rank ", d.rank, " (", d.path, ", dumped on ", d.reason, "): last completed ", d.last_completed);
  if (p != nullptr && p->seq == k) {
    const std::string since =
        p->blocked_ns != 0 && d.dump_time_ns > p->blocked_ns
            ? absl::StrCat(", blocked ", Seconds((d.dump_time_ns - p->blocked_ns) / 1e9), " s before its dump")
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

std::optional<Finding> DiagnoseHang(const std::vector<RankDump>& comm, double hang_after_s) {
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

// The call's identity across ranks: its collective and size (alltoallv's sizes differ by rank).
std::string CallKey(const Entry& e) {
  return e.collective == "alltoallv" ? e.collective : absl::StrCat(e.collective, " of ", Size(e.bytes));
}

std::optional<Finding> DiagnoseMismatch(const std::vector<RankDump>& comm) {
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

// Calls whose configuration an override forced, per (collective, configuration, source), from the dump of the
// lowest rank (the overrides are the same on every rank: the ranks compare them at init).
std::vector<Finding> DiagnoseOverrides(const std::vector<RankDump>& comm) {
  struct Group {
    uint64_t calls = 0, min_bytes = UINT64_MAX, max_bytes = 0, timed = 0;
    double timed_ms = 0;
  };
  const RankDump& d = comm.front();
  std::map<std::tuple<std::string, std::string, std::string>, Group> groups;
  for (const auto& [seq, e] : d.ops) {
    if (e.source != "HCCL_TUNE_ALGO" && e.source != "HCCL_ALGO") continue;
    Group& g = groups[{e.collective, e.config, e.source}];
    ++g.calls;
    g.min_bytes = std::min(g.min_bytes, e.bytes);
    g.max_bytes = std::max(g.max_bytes, e.bytes);
    if (e.duration_ms >= 0) {
      ++g.timed;
      g.timed_ms += e.duration_ms;
    }
  }
  std::vector<Finding> out;
  for (const auto& [key, g] : groups) {
    const auto& [coll, config, source] = key;
    Finding f;
    f.severity = Severity::kWarn;
    f.kind = "override";
    const double est_s =
        g.timed > 0 ? g.timed_ms / static_cast<double>(g.timed) * static_cast<double>(g.calls) / 1e3 : 0;
    f.cost = est_s > 0 ? est_s : static_cast<double>(g.calls) * 1e-9;
    const std::string sizes =
        g.min_bytes == g.max_bytes ? Size(g.min_bytes) : absl::StrCat(Size(g.min_bytes), "-", Size(g.max_bytes));
    f.title = absl::StrCat(g.calls, " ", coll, " calls of ", sizes, " ran ", config, ", forced by ", source);
    f.evidence.push_back(absl::StrCat("rank ", d.rank, " (", d.path, "): ", g.calls, " of its ", d.ops.size(),
                                      " recorded calls",
                                      g.timed > 0 ? absl::StrCat("; ", g.timed, " timed, ", Seconds(g.timed_ms / 1e3),
                                                                 " s in all, about ", Seconds(est_s), " s for all")
                                                  : std::string()));
    f.fix = absl::StrCat("check the forced configuration against the automatic choice: hccl-tune bench --coll ", coll,
                         " --ranks ", d.world, " --min-bytes ", FormatBytes(g.min_bytes), " --max-bytes ",
                         FormatBytes(g.max_bytes), " --algo '", config, "', then --algo auto; where auto is as fast, ",
                         "drop the rule from ", source, " (or unset it) and let the tuned table choose");
    out.push_back(std::move(f));
  }
  return out;
}

Finding Summary(const std::vector<RankDump>& comm) {
  Finding f;
  f.kind = "summary";
  f.title = absl::StrCat("communicator ", comm.front().tag, ": dumps of ", comm.size(), " of ", comm.front().world,
                         " ranks, no hang and no mismatch");
  for (const RankDump& d : comm) {
    f.evidence.push_back(absl::StrCat("rank ", d.rank, " (", d.path, ", dumped on ", d.reason, "): ", d.ops.size(),
                                      " calls recorded, last completed ", d.last_completed));
  }
  f.fix = "nothing to do";
  return f;
}

absl::StatusOr<std::vector<std::string>> ListDumps(const std::string& dir) {
  DIR* dp = opendir(dir.c_str());
  if (dp == nullptr) return absl::NotFoundError(absl::StrCat("cannot read directory ", dir, ": ", strerror(errno)));
  std::vector<std::string> paths;
  while (const dirent* e = readdir(dp)) {
    const std::string name = e->d_name;
    if (absl::StartsWith(name, "fr-") && absl::EndsWith(name, ".json")) paths.push_back(absl::StrCat(dir, "/", name));
  }
  closedir(dp);
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    return absl::NotFoundError(absl::StrCat(dir, " holds no flight-recorder dump (fr-<tag>-r<rank>.json; ",
                                            "docs/TROUBLESHOOTING.md, Dumps)"));
  }
  return paths;
}

}  // namespace

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarn: return "warn";
    case Severity::kError: return "error";
  }
  return "info";
}

absl::StatusOr<std::vector<Finding>> DiagnoseDumpDir(const std::string& dir, double hang_after_s) {
  auto paths = ListDumps(dir);
  if (!paths.ok()) return paths.status();
  std::map<std::string, std::vector<RankDump>> comms;  // by comm_tag, each by rank
  for (const std::string& p : *paths) {
    auto d = LoadDump(p);
    if (!d.ok()) return d.status();
    comms[d->tag].push_back(*std::move(d));
  }
  std::vector<Finding> out;
  for (auto& [tag, comm] : comms) {
    std::sort(comm.begin(), comm.end(), [](const RankDump& a, const RankDump& b) { return a.rank < b.rank; });
    const size_t before = out.size();
    if (auto m = DiagnoseMismatch(comm)) out.push_back(*std::move(m));
    if (auto h = DiagnoseHang(comm, hang_after_s)) out.push_back(*std::move(h));
    const bool trouble = out.size() > before;
    for (Finding& f : DiagnoseOverrides(comm)) out.push_back(std::move(f));
    if (!trouble) out.push_back(Summary(comm));
  }
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return a.severity != b.severity ? a.severity > b.severity : a.cost > b.cost;
  });
  return out;
}

std::string FormatFindings(const std::vector<Finding>& findings) {
  std::string out;
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    absl::StrAppend(&out, i + 1, ". [", SeverityName(f.severity), "] ", f.kind, ": ", f.title, "\n");
    for (const std::string& e : f.evidence) absl::StrAppend(&out, "   evidence: ", e, "\n");
    absl::StrAppend(&out, "   fix: ", f.fix, "\n");
  }
  return out;
}

}  // namespace hccltune::doctor

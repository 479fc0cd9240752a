// (d) buffers and (e) binding, from what each dump says of its process and node (tuner/doctor/rules.h).
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tuner/doctor/rules.h"

namespace hccltune::doctor {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kShmRingCap = 4 * kMiB;  // runtime/common/host.h ShmRingBytes

// "0-3,8": CPU numbers as taskset -c writes them.
std::string CpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

// Seconds of the recorded calls of `d` whose size is in [lo, hi): their count x the mean of those timed.
double TimeOfSizes(const RankDump& d, uint64_t lo, uint64_t hi) {
  uint64_t calls = 0, timed = 0;
  double ms = 0;
  for (const auto& [seq, e] : d.ops) {
    if (e.bytes < lo || e.bytes >= hi) continue;
    ++calls;
    if (e.duration_ms < 0) continue;
    ++timed;
    ms += e.duration_ms;
  }
  return timed > 0 ? ms / static_cast<double>(timed) * static_cast<double>(calls) / 1e3 : 0;
}

std::string RankCpu(const RankDump& d) {
  std::string s = absl::StrCat("rank ", d.rank, " (pid ", d.pid, "): CPUs ", CpuList(d.affinity));
  if (d.cpu_s >= 0 && d.wall_s > 0) {
    absl::StrAppend(&s, "; ", Fixed(d.cpu_s), " s of CPU in ", Fixed(d.wall_s), " s (",
                    Fixed(d.cpu_s / d.wall_s * 100, 0), "% of one CPU)");
  }
  return s;
}

// The binding finding of one node's ranks, or nullopt when each has CPUs enough.
std::optional<Finding> BindingOnNode(const std::string& node, const std::vector<const RankDump*>& ranks) {
  std::map<std::vector<int>, std::vector<int>> by_set;  // affinity -> ranks
  std::set<int> all;
  int local = 0, online = 0;
  for (const RankDump* d : ranks) {
    by_set[d->affinity].push_back(d->rank);
    all.insert(d->affinity.begin(), d->affinity.end());
    local = std::max(local, d->local_ranks);
    online = std::max(online, d->online_cpus);
  }
  local = std::max(local, static_cast<int>(ranks.size()));
  // Ranks that left no dump run on CPUs unknown here: they may use any online CPU.
  const int cpus = local > static_cast<int>(ranks.size()) ? std::max(online, static_cast<int>(all.size()))
                                                          : static_cast<int>(all.size());
  std::vector<std::string> shared;
  for (const auto& [set, rs] : by_set) {
    // Every online CPU is no pin (the default affinity): only oversubscription below can apply.
    if (rs.size() > set.size() && static_cast<int>(set.size()) < online) {
      shared.push_back(
          absl::StrCat(RankList(rs), " are all pinned to CPU", set.size() == 1 ? " " : "s ", CpuList(set)));
    }
  }
  if (shared.empty() && local <= cpus) return std::nullopt;
  // More ranks than CPUs costs only while they want the CPUs: ranks that mostly sleep (their CPU time over the
  // span of their dump, summed) well below the CPUs they share are not slowed by it.
  double demand = 0;
  bool known = true;
  for (const RankDump* d : ranks) {
    if (d->cpu_s < 0 || d->wall_s <= 0) known = false;
    if (known) demand += d->cpu_s / d->wall_s;
  }
  if (shared.empty() && known && local == static_cast<int>(ranks.size()) && demand < 0.75 * cpus) {
    return std::nullopt;
  }
  Finding f;
  f.severity = Severity::kWarn;
  f.kind = "binding";
  f.title = absl::StrCat("node ", ranks.front()->host.empty() ? node : ranks.front()->host, ": ",
                         shared.empty() ? "" : absl::StrCat(absl::StrJoin(shared, "; "), "; "), local, " ranks run on ",
                         cpus, " CPU", cpus == 1 ? "" : "s");
  double busy = 0;
  for (const RankDump* d : ranks) {
    f.evidence.push_back(RankCpu(*d));
    busy += TimeInCalls(*d).busy_s;
  }
  f.evidence.push_back(absl::StrCat("the node has ", online, " online CPUs; ranks wait for each other by polling, so ",
                                    "ranks sharing a CPU wait for its time slices"));
  f.cost = std::max(busy * (1 - static_cast<double>(cpus) / local), 1e-6);
  f.fix = absl::StrCat("give each rank CPUs of its own: drop a pin shared by every rank (taskset -c or numactl ",
                       "around the launcher applies to all the ranks it starts), pin per local rank instead ",
                       "(taskset -c $LOCAL_RANK ...), or run at most ", std::max(cpus, 1),
                       cpus > 1 ? " ranks" : " rank", " on this node");
  return f;
}

}  // namespace

// (d) Buffers: calls whose scratch need exceeded HCCL_BUFFSIZE (HCCL's "fallback to malloc"), per call-size
// bucket over every rank; the size that avoids them is the largest need rounded up to whole MB.
std::optional<Finding> DiagnoseBuffers(const Comm& comm) {
  std::map<std::pair<uint64_t, uint64_t>, BufferOverflow> buckets;
  uint64_t buffsize = 0;
  for (const RankDump& d : comm) {
    buffsize = std::max(buffsize, d.buffsize_bytes);
    for (const BufferOverflow& o : d.overflows) {
      BufferOverflow& b = buckets[{o.min_bytes, o.max_bytes}];
      b.min_bytes = o.min_bytes;
      b.max_bytes = o.max_bytes;
      b.calls = std::max(b.calls, o.calls);
      b.max_need_bytes = std::max(b.max_need_bytes, o.max_need_bytes);
    }
  }
  if (buckets.empty()) return std::nullopt;
  Finding f;
  f.severity = Severity::kWarn;
  f.kind = "buffers";
  uint64_t need = 0, calls = 0;
  for (const auto& [range, b] : buckets) {
    need = std::max(need, b.max_need_bytes);
    calls += b.calls;
    f.cost += TimeOfSizes(comm.front(), b.min_bytes, b.max_bytes);
    f.evidence.push_back(absl::StrCat("calls of ", Size(b.min_bytes), "-", Size(b.max_bytes), ": ", b.calls,
                                      " over HCCL_BUFFSIZE (the most on one rank), needing up to ",
                                      Size(b.max_need_bytes)));
  }
  const uint64_t mb = (need + kMiB - 1) / kMiB;
  const int local = comm.front().local_ranks;
  if (local > 1 && buffsize / static_cast<uint64_t>(local - 1) < kShmRingCap) {
    f.evidence.push_back(absl::StrCat("over shm each rank's ring per peer is min(4M, HCCL_BUFFSIZE / ", local - 1,
                                      ") = ", Size(buffsize / static_cast<uint64_t>(local - 1)),
                                      ": larger calls pass through it in more rounds"));
  }
  f.title = absl::StrCat(calls, " calls needed more scratch than HCCL_BUFFSIZE (", buffsize >> 20, " MB), up to ",
                         Size(need), f.cost > 0 ? absl::StrCat("; up to ", Duration(f.cost), " in those calls") : "");
  f.cost = std::max(f.cost, 1e-6);
  f.fix = absl::StrCat("HCCL_BUFFSIZE=", std::max<uint64_t>(mb, (kShmRingCap * std::max(local - 1, 1)) >> 20),
                       " (MB, on every rank) avoids it", " (the default is 200)");
  return f;
}

// (e) Binding: per node, ranks whose CPU affinity is the same set with fewer CPUs than ranks, or more ranks on the
// node than CPUs their affinities allow (ranks poll while they wait, so each wants a CPU).
std::vector<Finding> DiagnoseBinding(const Comm& comm) {
  std::map<std::string, std::vector<const RankDump*>> nodes;
  for (const RankDump& d : comm) {
    if (!d.affinity.empty()) nodes[d.Where()].push_back(&d);
  }
  std::vector<Finding> out;
  for (const auto& [node, ranks] : nodes) {
    if (auto f = BindingOnNode(node, ranks)) out.push_back(*std::move(f));
  }
  return out;
}

}  // namespace hccltune::doctor

// (b) algorithm: the configuration each call size ran against the tuned table's winner and the best measured.
//
// Algorithm. From the lowest rank's dump (every rank makes the same choice for every call: the ranks compare
// what decides it at init), calls are grouped by (collective, dtype, size, configuration, source); timed calls
// give the group's mean time. For each group the table's entry for its size is looked up under the dump's
// topology fingerprint and world size; the entry's sweep's samples at the measured size nearest the call's give a
// median time per configuration (max over ranks, as tables are built). The configuration that ran is matched
// exactly, else with its `link` parameters left out (link=auto resolves to the link the sweep measured). When it
// is more than 10% slower than the winner, the finding's cost is calls x (its time - the best measured). The
// groups of one (collective, configuration, source) make one finding. Groups of an override the table cannot
// judge (no table, no entry, not measured) are named anyway as overrides, costed by their own time.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"
#include "tuner/doctor/rules.h"

namespace hccltune::doctor {
namespace {

constexpr double kWorse = 0.10;  // slower than the winner by more than this is flagged

struct Group {
  uint64_t calls = 0, timed = 0;
  double timed_ms = 0;
  double MeanMs() const { return timed > 0 ? timed_ms / static_cast<double>(timed) : 0; }
};
// (collective, dtype, configuration, source) -> size -> group
using GroupKey = std::tuple<std::string, std::string, std::string, std::string>;
using Groups = std::map<GroupKey, std::map<uint64_t, Group>>;

Groups GroupCalls(const RankDump& d) {
  Groups groups;
  for (const auto& [seq, e] : d.ops) {
    if (e.config.empty() || e.source == "explore" || e.state != "completed") continue;
    Group& g = groups[{e.collective, e.dtype, e.config, e.source}][e.bytes];
    ++g.calls;
    if (e.duration_ms >= 0) {
      ++g.timed;
      g.timed_ms += e.duration_ms;
    }
  }
  return groups;
}

// A configuration without its link parameters: "ring(chunk=1M,channels=1,link=shm)" -> "ring(chunk=1M,channels=1)".
std::string WithoutLinks(const std::string& config) {
  std::string s;
  for (size_t i = 0; i < config.size();) {
    if (config.compare(i, 5, "link=") != 0) {
      s.push_back(config[i++]);
      continue;
    }
    while (i < config.size() && config[i] != ',' && config[i] != ')') ++i;  // the value (a subnet has no comma)
  }
  for (int i = 0; i < 4; ++i) s = absl::StrReplaceAll(s, {{",,", ","}, {"(,", "("}, {",)", ")"}, {"()", ""}});
  return s;
}

// What the table says about one size.
struct Measured {
  bool found = false;  // an entry covers the size
  std::string winner, best, sweep;
  double winner_us = 0, best_us = 0, used_us = 0;  // used_us 0: the configuration that ran was not measured
  uint64_t at_bytes = 0;                           // the measured size compared
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The sweep's medians per configuration at the measured size nearest `bytes` inside the entry's range.
std::map<std::string, double> MediansAt(const std::vector<db::SweepSample>& samples, const db::TunedEntry& entry,
                                        uint64_t bytes, uint64_t* at) {
  double best_dist = INFINITY;
  for (const db::SweepSample& s : samples) {
    if (s.collective != entry.key.collective || s.dtype != entry.key.dtype || s.world_size != entry.key.world_size ||
        !entry.key.range.Contains(s.bytes)) {
      continue;
    }
    const double dist = std::fabs(std::log2(static_cast<double>(s.bytes + 1) / static_cast<double>(bytes + 1)));
    if (dist < best_dist) {
      best_dist = dist;
      *at = s.bytes;
    }
  }
  std::map<std::string, std::vector<double>> times;
  for (const db::SweepSample& s : samples) {
    if (s.collective == entry.key.collective && s.dtype == entry.key.dtype && s.world_size == entry.key.world_size &&
        s.bytes == *at) {
      times[s.configuration].push_back(s.time_us);
    }
  }
  std::map<std::string, double> out;
  for (auto& [config, v] : times) out[config] = Median(std::move(v));
  return out;
}

// The time of `config` among `medians`: exactly, else the fastest measured with the same parameters but links.
double TimeOf(const std::map<std::string, double>& medians, const std::string& config) {
  if (auto it = medians.find(config); it != medians.end()) return it->second;
  const std::string bare = WithoutLinks(config);
  double t = 0;
  for (const auto& [c, us] : medians) {
    if (WithoutLinks(c) == bare && (t == 0 || us < t)) t = us;
  }
  return t;
}

class TableReader {
 public:
  TableReader(const DoctorOptions& o, const RankDump& d) : o_(o), d_(d) {}
  absl::StatusOr<Measured> At(const std::string& coll, const std::string& dtype, uint64_t bytes,
                              const std::string& config);
  bool no_table() const { return no_table_; }

 private:
  bool no_table_ = false;
  const DoctorOptions& o_;
  const RankDump& d_;
  std::map<std::string, std::vector<db::SweepSample>> samples_;  // by sweep id
};

absl::StatusOr<Measured> TableReader::At(const std::string& coll, const std::string& dtype, uint64_t bytes,
                                         const std::string& config) {
  Measured m;
  auto c = ParseCollective(coll);
  auto t = ParseDataType(dtype);
  if (!c.ok() || !t.ok()) return m;
  auto entry = o_.store->Lookup(d_.fingerprint, *c, *t, d_.world, bytes, 0);
  if (!entry.ok() && entry.status().code() == absl::StatusCode::kNotFound) {
    no_table_ = true;
    return m;
  }
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) return m;
  const db::TunedEntry& e = **entry;
  m.found = true;
  m.winner = e.configuration;
  m.sweep = e.sweep_id;
  m.winner_us = e.time_us;
  if (!samples_.count(e.sweep_id)) {
    auto s = o_.store->GetSweepSamples(e.sweep_id);
    samples_[e.sweep_id] = s.ok() ? *std::move(s) : std::vector<db::SweepSample>{};
  }
  const auto medians = MediansAt(samples_[e.sweep_id], e, bytes, &m.at_bytes);
  for (const auto& [cfg, us] : medians) {
    if (m.best.empty() || us < m.best_us) {
      m.best = cfg;
      m.best_us = us;
    }
  }
  if (double w = TimeOf(medians, m.winner); w > 0) m.winner_us = w;
  m.used_us = config == m.winner ? m.winner_us : TimeOf(medians, config);
  return m;
}

std::string FixFor(const std::string& source, const std::string& coll, const std::string& winner, const RankDump& d) {
  if (source == "HCCL_TUNE_ALGO" || source == "HCCL_ALGO") {
    return absl::StrCat("unset ", source, " (it is '", source == "HCCL_ALGO" ? d.hccl_algo : d.tune_algo,
                        "'), or drop its rule for ", coll, ", so the tuned table chooses (", winner, " here)");
  }
  if (source == "call") return absl::StrCat("pass \"auto\" on the call (the table chooses ", winner, ")");
  return absl::StrCat("the tuned table did not reach the job: check `hccl-tune status` (hccl-tuned running, ",
                      "HCCL_TUNE_DAEMON not off, HCCL_TUNE_MODE not off), or pin the winner: HCCL_TUNE_ALGO='", coll,
                      ":0-=", winner, "'");
}

bool IsOverride(const std::string& source) { return source == "HCCL_TUNE_ALGO" || source == "HCCL_ALGO"; }

// The finding for the groups of one key that the table judges; sizes it could not judge go to *unjudged.
std::optional<Finding> Judge(const GroupKey& key, const std::map<uint64_t, Group>& sizes, TableReader& table,
                             const RankDump& d, std::vector<uint64_t>* unjudged, absl::Status* error) {
  const auto& [coll, dtype, config, source] = key;
  Finding f;
  f.severity = Severity::kWarn;
  f.kind = "algorithm";
  std::string winner;
  double worst = 0;
  for (const auto& [bytes, g] : sizes) {
    auto m = table.At(coll, dtype, bytes, config);
    if (!m.ok()) {
      *error = m.status();
      unjudged->push_back(bytes);
      continue;
    }
    if (!m->found || m->used_us <= 0 || config == m->winner) {
      if (!m->found || m->used_us <= 0) unjudged->push_back(bytes);
      continue;
    }
    const double slower = m->used_us / m->winner_us - 1;
    if (slower <= kWorse) continue;
    worst = std::max(worst, slower);
    winner = m->winner;
    f.cost += static_cast<double>(g.calls) * (m->used_us - m->best_us) / 1e6;
    f.evidence.push_back(absl::StrCat(coll, " of ", Size(bytes), ": ", g.calls, " calls ran ", config, " (", source,
                                      "); sweep ", m->sweep, " at ", Size(m->at_bytes), ": it took ", Fixed(m->used_us),
                                      " us, the table's winner ", m->winner, " ", Fixed(m->winner_us), " us (+",
                                      Fixed(slower * 100, 0), "%), best measured ", m->best, " ", Fixed(m->best_us),
                                      " us"));
  }
  if (f.evidence.empty()) return std::nullopt;
  f.title = absl::StrCat(coll, " ran ", config, " (", source, "), up to ", Fixed(worst * 100, 0),
                         "% slower than the table's winner; about ", Duration(f.cost), " lost in the recorded calls");
  f.fix = FixFor(source, coll, winner, d);
  return f;
}

// An override the table could not judge: named with its own time (the upper bound of what it can cost).
Finding OverrideFinding(const GroupKey& key, const std::map<uint64_t, Group>& sizes, const std::vector<uint64_t>& only,
                        const RankDump& d) {
  const auto& [coll, dtype, config, source] = key;
  uint64_t calls = 0, lo = UINT64_MAX, hi = 0, timed = 0;
  double ms = 0, est_s = 0;
  for (uint64_t bytes : only) {
    const Group& g = sizes.at(bytes);
    calls += g.calls;
    timed += g.timed;
    ms += g.timed_ms;
    lo = std::min(lo, bytes);
    hi = std::max(hi, bytes);
    est_s += g.MeanMs() * static_cast<double>(g.calls) / 1e3;
  }
  Finding f;
  f.severity = Severity::kWarn;
  f.kind = "override";
  f.cost = est_s > 0 ? est_s : static_cast<double>(calls) * 1e-9;
  const std::string range = lo == hi ? Size(lo) : absl::StrCat(Size(lo), "-", Size(hi));
  f.title = absl::StrCat(calls, " ", coll, " calls of ", range, " ran ", config, ", forced by ", source);
  f.evidence.push_back(absl::StrCat(
      "rank ", d.rank, " (", d.path, "): ", calls, " of its ", d.ops.size(), " recorded calls",
      timed > 0
          ? absl::StrCat("; ", timed, " timed, ", Fixed(ms / 1e3), " s in all, about ", Fixed(est_s), " s for all")
          : std::string()));
  f.fix = absl::StrCat("check the forced configuration against the automatic choice: hccl-tune bench --coll ", coll,
                       " --ranks ", d.world, " --min-bytes ", FormatBytes(lo), " --max-bytes ", FormatBytes(hi),
                       " --algo '", config, "', then --algo auto; where auto is as fast, drop the rule from ", source,
                       " (or unset it) and let the tuned table choose");
  return f;
}

}  // namespace

std::vector<Finding> DiagnoseAlgorithms(const Comm& comm, const DoctorOptions& options) {
  const RankDump& d = comm.front();
  std::vector<Finding> out;
  TableReader table(options, d);
  absl::Status error;
  for (const auto& [key, sizes] : GroupCalls(d)) {
    std::vector<uint64_t> unjudged;
    if (options.store != nullptr && !d.fingerprint.empty()) {
      if (auto f = Judge(key, sizes, table, d, &unjudged, &error)) out.push_back(*std::move(f));
    } else {
      for (const auto& [bytes, g] : sizes) unjudged.push_back(bytes);
    }
    if (IsOverride(std::get<3>(key)) && !unjudged.empty()) out.push_back(OverrideFinding(key, sizes, unjudged, d));
  }
  if (table.no_table()) {
    Finding f;
    f.kind = "algorithm";
    f.title = absl::StrCat("no tuned table for topology ", d.fingerprint, " in ", options.store_name,
                           ": the calls' configurations were not compared with measurements");
    f.fix = absl::StrCat("tune this topology: hccl-tune sweep --ranks ", d.world,
                         " (or check that --db/--daemon names ", "the node's store)");
    out.push_back(std::move(f));
  }
  if (!error.ok()) {
    Finding f;
    f.kind = "algorithm";
    f.title = absl::StrCat("the tuned table could not be read from ", options.store_name, ": ", error.message());
    f.fix = "pass --db PATH (the node's database) or --daemon TARGET to compare the calls with the tuned table";
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace hccltune::doctor

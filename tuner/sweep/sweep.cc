#include "tuner/sweep/sweep.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "db/store_util.h"
#include "db/table_json.h"
#include "hccltune/version.h"
#include "nlohmann/json.hpp"
#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/json_field.h"
#include "tuner/bench/call.h"
#include "tuner/sweep/winners.h"

namespace hccltune::sweep {
namespace {

using json = nlohmann::json;

// ---- the spec as JSON (the sweep row's params; broadcast from rank 0) ----

template <typename T, typename F>
std::vector<std::string> Names(const std::vector<T>& v, F name) {
  std::vector<std::string> out;
  for (const T& x : v) out.emplace_back(name(x));
  return out;
}

// ---- rank 0 → everyone ----

absl::Status BroadcastString(Communicator& comm, std::string* s) {
  int64_t len = comm.rank() == 0 ? static_cast<int64_t>(s->size()) : 0;
  int64_t got = 0;
  if (absl::Status st = comm.Broadcast(&len, &got, 1, DataType::kInt64, 0); !st.ok()) return st;
  std::string buf(static_cast<size_t>(got), '\0');
  if (got > 0) {
    if (absl::Status st = comm.Broadcast(s->data(), buf.data(), static_cast<size_t>(got), DataType::kUint8, 0);
        !st.ok()) {
      return st;
    }
  }
  *s = std::move(buf);
  return absl::OkStatus();
}

// Command from rank 0: {op, point, candidate, iters, warmup}.
enum Op : int64_t { kStop = 0, kMeasure = 1, kAbort = 2, kCancel = 3 };

struct Space {
  std::vector<Point> points;
  std::vector<std::vector<std::string>> candidates;
  std::vector<std::string> defaults;
};

std::vector<LinkSpec> SweepLinks(const Communicator& comm, const SweepSpec& spec, absl::Status* err) {
  std::vector<LinkSpec> links;
  if (!spec.links.empty()) {
    for (const std::string& l : spec.links) {
      auto p = ParseLink(l);
      if (!p.ok()) {
        *err = absl::InvalidArgumentError(absl::StrCat("--links: ", p.status().message()));
        return {};
      }
      links.push_back(*p);
    }
    return links;
  }
  if (comm.num_nodes() <= 1) return {LinkSpec{LinkKind::kShm, ""}, LinkSpec{LinkKind::kTcp, ""}};
  auto topo = json::parse(comm.topology_json(), nullptr, false);
  if (!topo.is_discarded() && topo.contains("inter")) {
    for (const auto& i : topo["inter"]) {
      // Each TCP network and each RDMA network (roce / ib: a port on every node) is a candidate link.
      const std::string kind = JsonOr(i, "link", "");
      auto link = ParseLink(absl::StrCat(kind, "@", JsonOr(i, "network", "")));
      if (link.ok() && (kind == "tcp" || kind == "roce" || kind == "ib")) links.push_back(*link);
    }
  }
  if (links.empty()) links.push_back(LinkSpec{LinkKind::kTcp, ""});
  return links;
}

absl::StatusOr<Space> BuildSpace(const Communicator& comm, const SweepSpec& spec,
                                 const std::vector<Point>* explicit_points = nullptr) {
  Space sp;
  absl::Status err;
  const std::vector<LinkSpec> links = SweepLinks(comm, spec, &err);
  if (!err.ok()) return err;
  const std::vector<uint64_t> sizes = SweepSizes(spec);
  for (Collective c : spec.collectives) {
    const std::vector<std::string> valid = comm.ValidAlgorithms(c);
    std::vector<std::string> algs;
    for (const std::string& a : spec.algorithms) {
      if (std::find(valid.begin(), valid.end(), a) != valid.end()) algs.push_back(a);
    }
    if (spec.algorithms.empty()) algs = valid;
    if (algs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("no algorithm to sweep for ", CollectiveName(c), " on ", comm.size(), " ranks: asked for [",
                       absl::StrJoin(spec.algorithms, ", "), "], valid here: [", absl::StrJoin(valid, ", "), "]"));
    }
    std::vector<std::string> configs;
    for (const std::string& a : algs) {
      for (const Configuration& cfg : registry::Candidates(c, a, links)) {
        std::string s = cfg.ToString();
        // A candidate this communicator cannot run as written (a hierarchical form its nodes lack) is left out.
        if (!comm.ResolveConfig(c, DataType::kFloat32, 0, s).ok()) continue;
        if (std::find(configs.begin(), configs.end(), s) == configs.end()) configs.push_back(std::move(s));
      }
    }
    std::vector<Point> points;
    if (explicit_points != nullptr) {
      for (const Point& p : *explicit_points) {
        if (p.collective == c) points.push_back(p);
      }
    } else {
      for (DataType t : spec.dtypes) {
        for (uint64_t b : sizes) points.push_back(Point{c, t, b});
      }
    }
    for (const Point& p : points) {
      auto d = comm.ResolveConfig(c, p.dtype, p.bytes, "auto");
      if (!d.ok()) return d.status();
      sp.points.push_back(p);
      sp.candidates.push_back(configs);
      sp.defaults.push_back(*d);
    }
  }
  return sp;
}

// Runs batches on every rank. On rank 0 each Measure first broadcasts the command.
class CommMeasurer final : public Measurer {
 public:
  CommMeasurer(Communicator& comm, const Space& space) : comm_(comm), space_(space) {}

  absl::StatusOr<Batch> Measure(const Point& p, const std::string& config, int iters, int warmup) override {
    size_t pi = 0;
    while (pi < space_.points.size() && !(space_.points[pi].collective == p.collective &&
                                          space_.points[pi].dtype == p.dtype && space_.points[pi].bytes == p.bytes)) {
      ++pi;
    }
    if (pi == space_.points.size()) return absl::InternalError("measure: point not in the space");
    const auto& cands = space_.candidates[pi];
    int64_t ci = std::find(cands.begin(), cands.end(), config) - cands.begin();
    if (ci == static_cast<int64_t>(cands.size())) ci = -1;  // the default, added by the search
    int64_t cmd[5] = {kMeasure, static_cast<int64_t>(pi), ci, iters, warmup};
    if (absl::Status s = Send(cmd); !s.ok()) return s;
    return Run(cmd);
  }

  absl::Status Send(int64_t* cmd) {
    int64_t got[5] = {};
    if (absl::Status s = comm_.Broadcast(cmd, got, 5, DataType::kInt64, 0); !s.ok()) return s;
    return absl::OkStatus();
  }

  // Follower loop: runs commands until rank 0 says stop (OK) or abort (Aborted).
  absl::Status Follow() {
    while (true) {
      int64_t cmd[5] = {};
      int64_t got[5] = {};
      if (absl::Status s = comm_.Broadcast(cmd, got, 5, DataType::kInt64, 0); !s.ok()) return s;
      if (got[0] == kStop) return absl::OkStatus();
      if (got[0] == kAbort) return absl::AbortedError("rank 0 stopped the sweep");
      if (got[0] == kCancel) return absl::CancelledError("rank 0 stopped the sweep (resumable)");
      if (got[1] < 0 || got[1] >= static_cast<int64_t>(space_.points.size())) {
        return absl::InternalError("sweep: bad command from rank 0");
      }
      if (auto b = Run(got); !b.ok()) return b.status();
    }
  }

 private:
  absl::StatusOr<Batch> Run(const int64_t* cmd) {
    const size_t pi = static_cast<size_t>(cmd[1]);
    const Point& p = space_.points[pi];
    const std::string& config = cmd[2] < 0 ? space_.defaults[pi] : space_.candidates[pi][static_cast<size_t>(cmd[2])];
    const int iters = static_cast<int>(cmd[3]), warmup = static_cast<int>(cmd[4]);
    const int n = comm_.size();
    // Broadcast in place, as torch and MPI_Bcast run it (and as `hccl-tune bench` times it).
    const bench::CallSpec spec{p.collective, p.dtype, ReduceOp::kSum, 0, p.collective == Collective::kBroadcast};
    if (pi != buffers_point_) {
      buffers_ = bench::MakeBuffers(spec, comm_.rank(), n, p.bytes, &count_);
      buffers_point_ = pi;
    }
    CallOptions co;
    co.config = config;
    const CallOptions barrier;
    std::vector<double> mine;
    for (int it = 0; it < warmup + iters; ++it) {
      if (absl::Status s = comm_.Barrier(barrier); !s.ok()) return s;
      const auto t0 = std::chrono::steady_clock::now();
      if (absl::Status s = bench::Call(comm_, spec, count_, buffers_, co); !s.ok()) return s;
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (it >= warmup) mine.push_back(us);
    }
    Batch b;
    b.time_us.resize(mine.size());
    b.rank_time_us.resize(mine.size());
    if (absl::Status s =
            comm_.Allreduce(mine.data(), b.time_us.data(), mine.size(), DataType::kFloat64, ReduceOp::kMax, barrier);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = comm_.Allreduce(mine.data(), b.rank_time_us.data(), mine.size(), DataType::kFloat64,
                                         ReduceOp::kAvg, barrier);
        !s.ok()) {
      return s;
    }
    return b;
  }

  Communicator& comm_;
  const Space& space_;
  bench::Buffers buffers_;
  size_t buffers_point_ = static_cast<size_t>(-1);
  size_t count_ = 0;
};

std::string EntriesToJson(const Communicator& comm, const std::vector<db::TunedEntry>& entries) {
  db::Table t;
  t.topology = db::Topology{comm.fingerprint(), comm.topology_json()};
  t.entries = entries;
  return db::TablesToJson({t});
}

}  // namespace

namespace {

// Rank 0 only: PairedCheck of `a` against `b` at point `pi` of `space`, through `live` (the followers run the
// same commands). Blocks of 3 iterations after 1 warm-up; at most 41 pairs or `cap_us` of measured time.
absl::StatusOr<PairedCheck> HeadToHead(CommMeasurer& live, const Point& point, const std::string& a,
                                       const std::string& b, double cap_us) {
  PairedCheck out{a, b, {}, 0};
  std::vector<double> ratios;
  double spent = 0;
  for (int k = 0; k < 41 && (k < 7 || spent < cap_us); ++k) {
    double med[2] = {0, 0};
    for (int j = 0; j < 2; ++j) {
      const int which = (k % 2 == 0) ? j : 1 - j;  // A B, then B A
      auto batch = live.Measure(point, which == 0 ? a : b, 3, 1);
      if (!batch.ok()) return batch.status();
      for (double t : batch->time_us) spent += t;
      med[which] = MedianWithCI(batch->time_us).median;
    }
    if (med[0] > 0) ratios.push_back(med[1] / med[0]);
  }
  out.pairs = static_cast<int>(ratios.size());
  out.ratio = MedianWithCI(ratios);
  return out;
}

}  // namespace

absl::StatusOr<std::vector<PointResult>> MeasurePoints(Communicator& comm, const SweepSpec& spec,
                                                       const std::vector<Point>& points,
                                                       const std::vector<std::string>* stored,
                                                       std::vector<PairedCheck>* paired) {
  // Rank 0's points and spec, as text: {"spec": ..., "points": [[coll, dtype, bytes], ...]}.
  std::string wire;
  if (comm.rank() == 0) {
    json pts = json::array();
    for (const Point& p : points) {
      pts.push_back({static_cast<int>(p.collective), static_cast<int>(p.dtype), p.bytes});
    }
    wire = json{{"spec", json::parse(spec.ToJson())}, {"points", pts}}.dump();
  }
  if (absl::Status s = BroadcastString(comm, &wire); !s.ok()) return s;
  const json j = json::parse(wire, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("verify: bad broadcast");
  auto sp = SweepSpec::FromJson(j["spec"].dump());
  if (!sp.ok()) return sp.status();
  std::vector<Point> mine;
  for (const auto& p : j["points"]) {
    mine.push_back(
        Point{static_cast<Collective>(p[0].get<int>()), static_cast<DataType>(p[1].get<int>()), p[2].get<uint64_t>()});
  }
  std::vector<Collective> colls;
  for (const Point& p : mine) {
    if (std::find(colls.begin(), colls.end(), p.collective) == colls.end()) colls.push_back(p.collective);
  }
  sp->collectives = colls.empty() ? sp->collectives : colls;
  auto space = BuildSpace(comm, *sp, &mine);
  if (!space.ok()) return space.status();
  CommMeasurer live(comm, *space);
  if (comm.rank() != 0) {
    if (absl::Status s = live.Follow(); !s.ok()) return s;
    return std::vector<PointResult>{};
  }
  Search search(sp->search, &live);
  auto results = search.Run(space->points, space->candidates, space->defaults);
  if (results.ok() && stored != nullptr && paired != nullptr) {
    paired->assign(results->size(), PairedCheck{});
    for (size_t i = 0; i < results->size() && i < stored->size(); ++i) {
      const PointResult& r = (*results)[i];
      const std::string& mine_cfg = (*stored)[i];
      if (r.winner < 0) continue;
      const CandidateResult& best = r.candidates[static_cast<size_t>(r.winner)];
      auto it = std::find_if(r.candidates.begin(), r.candidates.end(),
                             [&](const CandidateResult& c) { return c.config == mine_cfg; });
      if (it == r.candidates.end() || it->config == best.config || it->stat.median <= best.stat.median * 1.05) continue;
      // Only configurations the measurer can name: listed candidates of the point, or its default.
      const auto& cands = space->candidates[i];
      auto known = [&](const std::string& c) {
        return c == space->defaults[i] || std::find(cands.begin(), cands.end(), c) != cands.end();
      };
      if (!known(mine_cfg) || !known(best.config)) continue;
      auto check = HeadToHead(live, r.point, best.config, mine_cfg, sp->search.cap_us);
      if (!check.ok()) {
        results = check.status();
        break;
      }
      (*paired)[i] = *check;
    }
  }
  int64_t stop_cmd[5] = {results.ok() ? kStop : kAbort, 0, 0, 0, 0};
  if (absl::Status s = live.Send(stop_cmd); !s.ok() && results.ok()) return s;
  return results;
}

std::string SweepSpec::ToJson() const {
  json j;
  j["collectives"] = Names(collectives, [](Collective c) { return std::string(CollectiveName(c)); });
  j["dtypes"] = Names(dtypes, [](DataType t) { return std::string(DataTypeName(t)); });
  j["min_bytes"] = min_bytes;
  j["max_bytes"] = max_bytes;
  j["step"] = step;
  j["algorithms"] = algorithms;
  j["links"] = links;
  j["exhaustive"] = search.exhaustive;
  j["target_rel_ci"] = search.target_rel_ci;
  j["cap_us"] = search.cap_us;
  j["max_iters"] = search.max_iters;
  j["first_batch"] = search.first_batch;
  j["batch"] = search.batch;
  j["min_iters"] = search.min_iters;
  if (exact_range) j["exact_range"] = FormatByteRange(*exact_range);
  return j.dump();
}

absl::StatusOr<SweepSpec> SweepSpec::FromJson(absl::string_view text) {
  auto j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("sweep parameters are not a JSON object");
  SweepSpec s;
  try {
    s.collectives.clear();
    for (const auto& c : j.at("collectives")) {
      auto v = ParseCollective(c.get<std::string>());
      if (!v.ok()) return v.status();
      s.collectives.push_back(*v);
    }
    s.dtypes.clear();
    for (const auto& t : j.at("dtypes")) {
      auto v = ParseDataType(t.get<std::string>());
      if (!v.ok()) return v.status();
      s.dtypes.push_back(*v);
    }
    s.min_bytes = j.at("min_bytes").get<uint64_t>();
    s.max_bytes = j.at("max_bytes").get<uint64_t>();
    s.step = j.at("step").get<int>();
    s.algorithms = j.at("algorithms").get<std::vector<std::string>>();
    s.links = j.at("links").get<std::vector<std::string>>();
    s.search.exhaustive = j.at("exhaustive").get<bool>();
    s.search.target_rel_ci = j.at("target_rel_ci").get<double>();
    s.search.cap_us = j.at("cap_us").get<double>();
    s.search.max_iters = j.at("max_iters").get<int>();
    s.search.first_batch = j.at("first_batch").get<int>();
    s.search.batch = j.at("batch").get<int>();
    s.search.min_iters = j.at("min_iters").get<int>();
    if (j.contains("exact_range")) {
      auto r = ParseByteRange(j.at("exact_range").get<std::string>());
      if (!r.ok())
        return absl::InvalidArgumentError(absl::StrCat("sweep parameters: exact_range: ", r.status().message()));
      s.exact_range = *r;
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("sweep parameters: ", e.what()));
  }
  if (absl::Status st = s.Validate(); !st.ok()) return st;
  return s;
}

absl::Status SweepSpec::Validate() const {
  if (collectives.empty()) return absl::InvalidArgumentError("no collective to sweep");
  if (dtypes.empty()) return absl::InvalidArgumentError("no dtype to sweep");
  for (Collective c : collectives) {
    if (c == Collective::kSendRecv || c == Collective::kAlltoallv || c == Collective::kBarrier) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot sweep ", CollectiveName(c),
          ": it has no size-dependent choice (sendrecv has no algorithm, barrier no size, alltoallv runs pairwise)"));
    }
  }
  if (min_bytes > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("inverted size range: --min-bytes ", min_bytes, " is above --max-bytes ", max_bytes));
  }
  if (max_bytes > db::kMaxBytes)
    return absl::InvalidArgumentError(absl::StrCat("--max-bytes ", max_bytes, " is absurd"));
  if (step < 2 || (step & (step - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--step must be a power of two >= 2, got ", step));
  }
  if (exact_range &&
      (exact_range->min != min_bytes || (exact_range->max != kUnbounded && max_bytes >= exact_range->max))) {
    return absl::InvalidArgumentError(absl::StrCat("--range ", FormatByteRange(*exact_range),
                                                   " does not match the measured sizes [", min_bytes, ", ", max_bytes,
                                                   "]"));
  }
  if (exact_range && SweepSizes(*this).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--range ", FormatByteRange(*exact_range), " holds no power of two to measure"));
  }
  if (SweepSizes(*this).empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty size range: no power of two in [", min_bytes, ", ", max_bytes, "]"));
  }
  if (search.target_rel_ci <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--ci must be > 0 (got ", search.target_rel_ci, ")"));
  }
  if (search.cap_us <= 0) return absl::InvalidArgumentError("--cap-ms must be > 0");
  if (search.first_batch < 1 || search.batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch sizes must be >= 1 (got ", search.first_batch, " and ", search.batch, ")"));
  }
  if (search.max_iters < search.min_iters) {
    return absl::InvalidArgumentError(absl::StrCat("--max-iters must be at least the ", search.min_iters,
                                                   " iterations a candidate needs before it may finish (got ",
                                                   search.max_iters, ")"));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> SweepSizes(const SweepSpec& spec) {
  std::vector<uint64_t> out;
  uint64_t b = 1;
  while (b < spec.min_bytes) b *= 2;
  for (; b <= spec.max_bytes && b <= db::kMaxBytes; b *= static_cast<uint64_t>(spec.step)) out.push_back(b);
  return out;
}

std::string NewSweepId() {
  const absl::Time now = absl::Now();
  std::random_device rd;
  return absl::StrCat("sw-", absl::FormatTime("%Y%m%d-%H%M%S", now, absl::UTCTimeZone()), "-",
                      absl::Hex(rd() & 0xffff, absl::kZeroPad4));
}

QuietCheck CheckNodeQuiet(db::TuningStore* journal, const std::string& own_id) {
  QuietCheck q;
  std::ifstream f("/proc/loadavg");
  double load = 0;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (f >> load && cpus > 0) {
    if (load > static_cast<double>(cpus)) {
      q.warning = absl::StrCat("the node is busy: 1-minute load ", load, " on ", cpus,
                               " CPUs; a sweep now measures the other work, not the links");
      q.refuse = true;
    } else if (load > 0.5 * static_cast<double>(cpus)) {
      q.warning = absl::StrCat("the node is not quiet: 1-minute load ", load, " on ", cpus, " CPUs");
    }
  }
  if (journal != nullptr) {
    auto sweeps = journal->ListSweeps();
    if (sweeps.ok()) {
      for (const db::Sweep& s : *sweeps) {
        if (s.id == own_id || s.status != db::SweepStatus::kRunning) continue;
        if (db::SweepInProgress(s, db::NowUnixMs())) {
          q.warning = absl::StrCat(q.warning, q.warning.empty() ? "" : "; ", "sweep ", s.id,
                                   " is marked running (if it died, --resume it or pass --force)");
          q.refuse = true;
        } else if (db::SweepOwnerGone(s)) {
          // Killed (SIGKILL, OOM) before it could mark its row: nothing holds the node; say how to continue it.
          q.warning =
              absl::StrCat(q.warning, q.warning.empty() ? "" : "; ", "sweep ", s.id,
                           " was interrupted (its process is gone); hccl-tune sweep --resume ", s.id, " continues it");
        }
      }
    }
  }
  return q;
}

absl::Status CheckResumable(const db::Sweep& row, int64_t now_unix_ms) {
  if (row.status != db::SweepStatus::kRunning || db::SweepOwnerGone(row)) return absl::OkStatus();
  const json params = json::parse(row.params_json, nullptr, false);
  const json owner =
      params.is_object() && params.contains("owner") && params["owner"].is_object() ? params["owner"] : json::object();
  const json self = json::parse(db::ThisProcessOwnerJson());
  const int64_t pid = JsonOr(owner, "pid", int64_t{0});
  const std::string boot = JsonOr(self, "boot_id", "");
  const bool here = !boot.empty() && JsonOr(owner, "boot_id", "") == boot &&
                    JsonOr(owner, "pid_ns", "") == JsonOr(self, "pid_ns", "");
  // An owner on this machine that is not gone still runs, however long ago the sweep first started (a resumed
  // sweep keeps its first start time); where that cannot be told, the 6 h horizon of SweepInProgress decides.
  if (!(here && pid > 0) && !db::SweepInProgress(row, now_unix_ms)) return absl::OkStatus();
  std::string who;
  if (pid <= 0) {
    who = "its row names no owning process";
  } else if (here) {
    who = absl::StrCat("its owner, pid ", pid, ", is still running");
  } else {
    who = absl::StrCat("its owner, pid ", pid,
                       ", runs on another machine, boot or container (where that cannot be "
                       "told, a running row counts for 6 h)");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "sweep ", row.id, " is still marked running (", who, ", started ",
      absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(row.started_unix_ms), absl::UTCTimeZone()),
      "): wait for it to finish, or pass --force if it really died"));
}

namespace {

// The fingerprint of the topology a journal row's sweep ran on, in the current format: a sweep journalled by a
// client of an older format names its topology by that format.
std::string SweptFingerprint(const json& params) {
  auto keys = CanonicalTopology(JsonOr(params, "topology", ""));
  return keys.ok() ? keys->fingerprint : JsonOr(params, "fingerprint", "?");
}

// Rank 0: the winners, in one transaction, merged into the topology's latest table; the sweep row marked done.
absl::Status StoreWinners(const Communicator& comm, const RankZeroIo& io, SweepOutcome& out, db::Sweep& sweep_row) {
  auto version = PutMerged(*io.tables, db::Topology{comm.fingerprint(), comm.topology_json()}, out.entries);
  if (!version.ok()) {
    sweep_row.status = db::SweepStatus::kFailed;
    sweep_row.message = absl::StrCat("storing the winners: ", version.status().message());
    (void)io.journal->PutSweep(sweep_row);
    return version.status();
  }
  out.table_version = *version;
  sweep_row.status = db::SweepStatus::kDone;
  sweep_row.progress = 1;
  sweep_row.finished_unix_ms = db::NowUnixMs();
  sweep_row.message = absl::StrCat(out.entries.size(), " entries, table version ", *version);
  return io.journal->PutSweep(sweep_row);
}

}  // namespace

absl::StatusOr<SweepOutcome> RunSweep(Communicator& comm, const SweepSpec& spec_in, const RankZeroIo& io) {
  const auto t0 = std::chrono::steady_clock::now();
  SweepOutcome out;
  const bool leader = comm.rank() == 0;
  std::vector<db::SweepSample> kept;
  // 1. Rank 0 settles the spec (a resumed sweep keeps its own) and opens the sweep row.
  std::string wire;
  absl::Status setup;
  if (leader) {
    out.sweep_id = io.sweep_id;
    SweepSpec spec = spec_in;
    if (io.journal == nullptr || io.tables == nullptr) setup = absl::InvalidArgumentError("sweep: no storage");
    db::Sweep row;
    if (setup.ok() && io.resume) {
      auto r = io.journal->GetSweep(io.sweep_id);
      if (!r.ok()) {
        setup = r.status();
      } else if (r->status == db::SweepStatus::kDone) {
        setup = absl::FailedPreconditionError(absl::StrCat("sweep ", io.sweep_id, " is already done"));
      } else {
        row = *r;
        json params = json::parse(row.params_json, nullptr, false);
        if (params.is_discarded() || !params.contains("spec")) {
          setup = absl::DataLossError(absl::StrCat("sweep ", io.sweep_id, " has unreadable parameters"));
        } else if (SweptFingerprint(params) != comm.fingerprint() || JsonOr(params, "world", 0) != comm.size()) {
          setup = absl::FailedPreconditionError(absl::StrCat(
              "sweep ", io.sweep_id, " ran on topology ", SweptFingerprint(params), " with ",
              JsonOr(params, "world", 0), " ranks; this job is ", comm.fingerprint(), " with ", comm.size()));
        } else {
          auto s = SweepSpec::FromJson(params["spec"].dump());
          if (!s.ok())
            setup = s.status();
          else
            spec = *s;
        }
        if (setup.ok()) {
          auto k = io.journal->GetSweepSamples(io.sweep_id);
          if (!k.ok())
            setup = k.status();
          else
            kept = *std::move(k);
        }
      }
    } else if (setup.ok()) {
      row.id = io.sweep_id;
      row.started_unix_ms = db::NowUnixMs();
      json params = {{"spec", json::parse(spec.ToJson())},
                     {"fingerprint", comm.fingerprint()},
                     {"topology", comm.topology_json()},
                     {"world", comm.size()}};
      row.params_json = params.dump();
    }
    if (setup.ok()) setup = spec.Validate();
    if (setup.ok()) {
      row.status = db::SweepStatus::kRunning;
      row.finished_unix_ms = 0;
      row.message = io.resume ? "resumed" : "";
      // This process owns the running row now: a later busy check can tell when it died without a word.
      json params = json::parse(row.params_json, nullptr, false);
      if (params.is_object()) {
        params["owner"] = json::parse(db::ThisProcessOwnerJson());
        row.params_json = params.dump();
      }
      setup = io.journal->PutSweep(row);
    }
    wire = setup.ok() ? spec.ToJson() : std::string("!") + std::string(setup.message());
  }
  if (absl::Status s = BroadcastString(comm, &wire); !s.ok()) return s;
  if (!setup.ok()) return setup;
  if (!wire.empty() && wire[0] == '!') return absl::AbortedError(absl::StrCat("rank 0: ", wire.substr(1)));
  auto spec = SweepSpec::FromJson(wire);
  if (!spec.ok()) return spec.status();
  out.spec = *spec;

  // 2. Every rank builds the same space. A failure here is deterministic, so every rank sees it.
  auto space = BuildSpace(comm, out.spec);
  if (!space.ok()) {
    if (leader) {
      db::Sweep row;
      if (auto r = io.journal->GetSweep(io.sweep_id); r.ok()) row = *r;
      row.status = db::SweepStatus::kFailed;
      row.finished_unix_ms = db::NowUnixMs();
      row.message = std::string(space.status().message());
      (void)io.journal->PutSweep(row);
    }
    return space.status();
  }
  CommMeasurer live(comm, *space);
  if (!leader) {
    if (absl::Status s = live.Follow(); !s.ok()) return s;
  } else {
    ReplayMeasurer replay(&live, kept);
    Search search(out.spec.search, &replay);
    auto row = io.journal->GetSweep(io.sweep_id);
    if (!row.ok()) return row.status();
    db::Sweep sweep_row = *row;
    search.on_batch = [&](const Point& p, const std::string& config, const Batch& b) -> absl::Status {
      if (replay.last_replayed) return absl::OkStatus();
      std::vector<db::SweepSample> rows;
      for (size_t i = 0; i < b.time_us.size(); ++i) {
        rows.push_back(db::SweepSample{p.collective, p.dtype, comm.size(), p.bytes, config, b.time_us[i],
                                       b.rank_time_us[i], static_cast<int>(i)});
      }
      return io.journal->AddSweepSamples(io.sweep_id, rows);
    };
    absl::Status progress_error;
    search.on_progress = [&](const Progress& pr) {
      sweep_row.progress = pr.total ? static_cast<double>(pr.done) / static_cast<double>(pr.total) : 0;
      if (absl::Status s = io.journal->PutSweep(sweep_row); !s.ok() && progress_error.ok()) progress_error = s;
      if (io.on_progress) io.on_progress(pr);
    };
    search.should_stop = [&] { return (io.stop != nullptr && io.stop->load()) || !progress_error.ok(); };
    auto results = search.Run(space->points, space->candidates, space->defaults);
    out.replayed_iterations = replay.replayed;
    out.stats = search.stats();
    int64_t stop_cmd[5] = {results.ok() ? kStop : absl::IsCancelled(results.status()) ? kCancel : kAbort, 0, 0, 0, 0};
    absl::Status sent = live.Send(stop_cmd);
    if (!results.ok() || !progress_error.ok()) {
      absl::Status err = !progress_error.ok() ? progress_error : results.status();
      sweep_row.status = absl::IsCancelled(err) ? db::SweepStatus::kCancelled : db::SweepStatus::kFailed;
      sweep_row.finished_unix_ms = db::NowUnixMs();
      sweep_row.message = absl::IsCancelled(err) ? "stopped; resumable" : std::string(err.message());
      (void)io.journal->PutSweep(sweep_row);
      return err;
    }
    if (!sent.ok()) return sent;
    out.results = *std::move(results);
    EntryContext ctx{comm.size(), out.spec.min_bytes, out.spec.max_bytes,
                     io.sweep_id, HCCL_TUNE_VERSION,  db::NowUnixMs()};
    ctx.exact_range = out.spec.exact_range;
    out.entries = BuildEntries(out.results, ctx);
    if (!io.store_table) {
      sweep_row.status = db::SweepStatus::kDone;
      sweep_row.progress = 1;
      sweep_row.finished_unix_ms = db::NowUnixMs();
      sweep_row.message = absl::StrCat(out.entries.size(), " entries, not stored (--no-table)");
      if (absl::Status s = io.journal->PutSweep(sweep_row); !s.ok()) return s;
    } else if (absl::Status s = StoreWinners(comm, io, out, sweep_row); !s.ok()) {
      return s;
    }
  }
  // 4. Everyone gets the winners.
  std::string winners = leader ? EntriesToJson(comm, out.entries) : std::string();
  if (absl::Status s = BroadcastString(comm, &winners); !s.ok()) return s;
  if (!leader) {
    auto t = db::TablesFromJson(winners);
    if (!t.ok()) return t.status();
    if (!t->empty()) out.entries = t->front().entries;
    out.sweep_id = io.sweep_id;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace hccltune::sweep

#include "tuner/peers/peer_sweep.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "db/store_util.h"
#include "hccltune/version.h"
#include "nlohmann/json.hpp"
#include "runtime/common/config.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/json_field.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/peers/mpi_job.h"
#include "tuner/sweep/winners.h"

namespace hccltune::peers {
namespace {

using json = nlohmann::json;

// Batches through the MPI job.
class JobMeasurer final : public sweep::Measurer {
 public:
  explicit JobMeasurer(MpiJob* job) : job_(job) {}
  absl::StatusOr<sweep::Batch> Measure(const sweep::Point& p, const std::string& config, int iters,
                                       int warmup) override {
    auto c = PeerConfiguration::Parse(config);
    if (!c.ok()) return c.status();
    return job_->Measure(p.collective, p.bytes, *c, iters, warmup);
  }

 private:
  MpiJob* job_;
};

struct Space {
  std::vector<sweep::Point> points;
  std::vector<std::vector<std::string>> candidates;
  std::vector<std::string> defaults;
};

absl::StatusOr<Space> BuildSpace(MpiJob& job, const PeerSweepSpec& ps, const sweep::SweepSpec& spec) {
  Space sp;
  const std::string dflt = PeerConfiguration::Default(ps.runtime)->ToString();
  for (Collective c : spec.collectives) {
    auto names = job.Algorithms(c);
    if (!names.ok()) return names.status();
    std::vector<std::string> algs;
    for (const std::string& a : *names) {
      // two_proc runs on two ranks only (Open MPI falls back to another algorithm otherwise).
      if (a == "two_proc" && job.ranks() != 2) continue;
      if (spec.algorithms.empty() || std::count(spec.algorithms.begin(), spec.algorithms.end(), a) > 0) {
        algs.push_back(a);
      }
    }
    for (const std::string& a : spec.algorithms) {
      if (std::count(names->begin(), names->end(), a) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(ps.runtime, " ", job.version(), " has no ", CollectiveName(c),
                                                       " algorithm '", a, "'; it has: ", absl::StrJoin(*names, ", ")));
      }
    }
    std::vector<std::string> configs;
    for (const std::string& a : algs) {
      const bool seg = ps.runtime == kOpenMpi && OpenMpiSegments(c, a);
      for (uint64_t s : seg ? ps.segments : std::vector<uint64_t>{0}) {
        configs.push_back(PeerConfiguration{ps.runtime, a, s}.ToString());
      }
    }
    for (DataType t : spec.dtypes) {
      for (uint64_t b : sweep::SweepSizes(spec)) {
        sp.points.push_back(sweep::Point{c, t, b});
        sp.candidates.push_back(configs);
        sp.defaults.push_back(dflt);
      }
    }
  }
  return sp;
}

absl::Status CheckSpec(const PeerSweepSpec& ps) {
  if (ps.runtime != kOpenMpi && ps.runtime != kMpich) {
    return absl::InvalidArgumentError(absl::StrCat("--runtime ", ps.runtime, " is unknown; accepted: openmpi, mpich"));
  }
  for (Collective c : ps.spec.collectives) {
    if (!PeerCollective(c)) {
      return absl::InvalidArgumentError(absl::StrCat("--runtime ", ps.runtime, ": the MPI bench runs allreduce, ",
                                                     "allgather, broadcast and reducescatter, not ",
                                                     CollectiveName(c)));
    }
  }
  for (DataType t : ps.spec.dtypes) {
    if (t != DataType::kFloat32) {
      return absl::InvalidArgumentError(
          absl::StrCat("--runtime ", ps.runtime, ": the MPI bench measures fp32, not ", DataTypeName(t)));
    }
  }
  if (!ps.spec.links.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--links does not apply to --runtime ", ps.runtime));
  }
  return ps.spec.Validate();
}

// The sweep row: a new one, or the resumed one (its spec and ranks win; its runtime must match).
absl::Status OpenRow(const PeerSweepSpec& ps, const PeerSweepIo& io, const db::Topology& topo, sweep::SweepSpec* spec,
                     db::Sweep* row, std::vector<db::SweepSample>* kept) {
  if (io.resume) {
    auto r = io.journal->GetSweep(io.sweep_id);
    if (!r.ok()) return r.status();
    if (r->status == db::SweepStatus::kDone) {
      return absl::FailedPreconditionError(absl::StrCat("sweep ", io.sweep_id, " is already done"));
    }
    *row = *r;
    json params = json::parse(row->params_json, nullptr, false);
    if (params.is_discarded() || !params.contains("spec")) {
      return absl::DataLossError(absl::StrCat("sweep ", io.sweep_id, " has unreadable parameters"));
    }
    if (JsonOr(params, "fingerprint", "") != topo.fingerprint) {
      return absl::FailedPreconditionError(absl::StrCat("sweep ", io.sweep_id, " ran on topology ",
                                                        JsonOr(params, "fingerprint", "?"), "; this job is ",
                                                        topo.fingerprint, " (", topo.json, ")"));
    }
    auto s = sweep::SweepSpec::FromJson(params["spec"].dump());
    if (!s.ok()) return s.status();
    *spec = *s;
    auto k = io.journal->GetSweepSamples(io.sweep_id);
    if (!k.ok()) return k.status();
    *kept = *std::move(k);
  } else {
    row->id = io.sweep_id;
    row->started_unix_ms = db::NowUnixMs();
    row->params_json = json{
        {"spec", json::parse(spec->ToJson())},
        {"fingerprint", topo.fingerprint},
        {"topology", topo.json},
        {"world", ps.ranks},
        {"runtime", ps.runtime},
        {"segments",
         ps.segments}}.dump();
  }
  row->status = db::SweepStatus::kRunning;
  row->finished_unix_ms = 0;
  row->message = io.resume ? "resumed" : "";
  json params = json::parse(row->params_json, nullptr, false);
  if (params.is_object()) {
    params["owner"] = json::parse(db::ThisProcessOwnerJson());
    row->params_json = params.dump();
  }
  return io.journal->PutSweep(*row);
}

void Finish(const PeerSweepIo& io, db::Sweep& row, db::SweepStatus status, const std::string& message) {
  row.status = status;
  row.finished_unix_ms = db::NowUnixMs();
  row.message = message;
  if (status == db::SweepStatus::kDone) row.progress = 1;
  (void)io.journal->PutSweep(row);
}

}  // namespace

bool OpenMpiSegments(Collective c, const std::string& a) {
  if (c == Collective::kAllreduce) return a == "segmented_ring";
  if (c == Collective::kBroadcast) {
    return a == "chain" || a == "pipeline" || a == "split_binary_tree" || a == "binary_tree" || a == "binomial" ||
           a == "knomial";
  }
  return false;
}

absl::StatusOr<PeerSweepOutcome> RunPeerSweep(const PeerSweepSpec& ps_in, const PeerSweepIo& io) {
  const auto t0 = std::chrono::steady_clock::now();
  if (io.journal == nullptr || io.tables == nullptr) return absl::InvalidArgumentError("sweep: no storage");
  PeerSweepSpec ps = ps_in;
  if (io.resume) {
    // The journalled spec, segments and ranks decide; read them before the job starts.
    auto r = io.journal->GetSweep(io.sweep_id);
    if (!r.ok()) return r.status();
    json params = json::parse(r->params_json, nullptr, false);
    if (!params.is_object() || JsonOr(params, "runtime", "") != ps.runtime) {
      return absl::FailedPreconditionError(absl::StrCat("sweep ", io.sweep_id, " is not a sweep of ", ps.runtime));
    }
    ps.ranks = JsonOr(params, "world", ps.ranks);
    if (params.contains("segments")) ps.segments = params["segments"].get<std::vector<uint64_t>>();
  }
  if (absl::Status s = CheckSpec(ps); !s.ok()) return s;
  auto env = Environment::Load();
  if (!env.ok()) return env.status();
  auto rt = FindMpiRuntime(ps.runtime, env->path);
  if (!rt.ok()) return rt.status();
  auto job = MpiJob::Start(*rt, ps.ranks);
  if (!job.ok()) return job.status();
  TopologyDescription d;
  d.ranks_per_node = {ps.ranks};
  if (ps.ranks >= 2) d.intra = {"shm"};
  d.release = HCCL_TUNE_RELEASE;
  d.runtime = absl::StrCat(ps.runtime, "-", (*job)->version());
  const TopologyKeys keys = KeysOf(d);
  PeerSweepOutcome out;
  out.topology = db::Topology{keys.fingerprint, keys.json, keys.topology_class};
  sweep::SweepOutcome& o = out.outcome;
  o.sweep_id = io.sweep_id;
  o.spec = ps.spec;
  db::Sweep row;
  std::vector<db::SweepSample> kept;
  if (absl::Status s = OpenRow(ps, io, out.topology, &o.spec, &row, &kept); !s.ok()) return s;
  auto space = BuildSpace(**job, ps, o.spec);
  if (!space.ok()) {
    Finish(io, row, db::SweepStatus::kFailed, std::string(space.status().message()));
    return space.status();
  }
  JobMeasurer live(job->get());
  sweep::ReplayMeasurer replay(&live, kept);
  sweep::Search search(o.spec.search, &replay);
  search.on_batch = [&](const sweep::Point& p, const std::string& config, const sweep::Batch& b) -> absl::Status {
    if (replay.last_replayed) return absl::OkStatus();
    std::vector<db::SweepSample> rows;
    for (size_t i = 0; i < b.time_us.size(); ++i) {
      rows.push_back(db::SweepSample{p.collective, p.dtype, ps.ranks, p.bytes, config, b.time_us[i], b.rank_time_us[i],
                                     static_cast<int>(i)});
    }
    return io.journal->AddSweepSamples(io.sweep_id, rows);
  };
  absl::Status progress_error;
  search.on_progress = [&](const sweep::Progress& pr) {
    row.progress = pr.total ? static_cast<double>(pr.done) / static_cast<double>(pr.total) : 0;
    if (absl::Status s = io.journal->PutSweep(row); !s.ok() && progress_error.ok()) progress_error = s;
    if (io.on_progress) io.on_progress(pr);
  };
  search.should_stop = [&] { return (io.stop != nullptr && io.stop->load()) || !progress_error.ok(); };
  auto results = search.Run(space->points, space->candidates, space->defaults);
  o.replayed_iterations = replay.replayed;
  o.stats = search.stats();
  if (!results.ok() || !progress_error.ok()) {
    const absl::Status err = !progress_error.ok() ? progress_error : results.status();
    Finish(io, row, absl::IsCancelled(err) ? db::SweepStatus::kCancelled : db::SweepStatus::kFailed,
           absl::IsCancelled(err) ? "stopped; resumable" : std::string(err.message()));
    return err;
  }
  o.results = *std::move(results);
  sweep::EntryContext ctx{
      ps.ranks,       o.spec.min_bytes, o.spec.max_bytes, io.sweep_id, absl::StrCat(ps.runtime, "-", (*job)->version()),
      db::NowUnixMs()};
  o.entries = sweep::BuildEntries(o.results, ctx);
  if (!io.store_table) {
    Finish(io, row, db::SweepStatus::kDone, absl::StrCat(o.entries.size(), " entries, not stored (--no-table)"));
  } else {
    auto version = sweep::PutMerged(*io.tables, out.topology, o.entries);
    if (!version.ok()) {
      Finish(io, row, db::SweepStatus::kFailed, absl::StrCat("storing the winners: ", version.status().message()));
      return version.status();
    }
    o.table_version = *version;
    Finish(io, row, db::SweepStatus::kDone, absl::StrCat(o.entries.size(), " entries, table version ", *version));
  }
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace hccltune::peers

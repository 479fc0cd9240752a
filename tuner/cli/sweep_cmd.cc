// `hccl-tune sweep`: measure every candidate configuration on this node's ranks (or a launched job's) and keep
// the winners. Storage: through the daemon (the table) plus a local journal file for samples/progress, or one
// --db file for both. See tuner/sweep/sweep.h for the protocol.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "db/sqlite_store.h"
#include "db/store_util.h"
#include "nlohmann/json.hpp"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/json_field.h"
#include "runtime/common/sizes.h"
#include "tuner/bench/rank_report.h"
#include "tuner/bench/spawn.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"
#include "tuner/cli/sweep_common.h"
#include "tuner/cli/sweep_daemon.h"
#include "tuner/peers/peer_sweep.h"
#include "tuner/sweep/sweep.h"
#include "tuner/sweep/winners.h"

namespace hccltune::cli {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

struct SweepArgs {
  std::string coll = "allreduce", dtype = "fp32", min_bytes = "1K", max_bytes = "64M", algo, links, resume, sweep_id,
              journal, range, runtime;
  int ranks = 2, step = 2, max_iters = 200;
  double ci = 0.03, cap_ms = 300;
  bool exhaustive = false, launched = false, force = false, json = false, plain = false, checked = false,
       no_table = false;
  StoreFlags store;
  DaemonSweepFlags via;
};

absl::StatusOr<sweep::SweepSpec> SpecFromArgs(const SweepArgs& a) {
  sweep::SweepSpec s;
  s.collectives.clear();
  for (absl::string_view c : absl::StrSplit(a.coll, ',', absl::SkipEmpty())) {
    auto v = ParseCollective(c);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("--coll: ", v.status().message()));
    s.collectives.push_back(*v);
  }
  s.dtypes.clear();
  for (absl::string_view t : absl::StrSplit(a.dtype, ',', absl::SkipEmpty())) {
    auto v = ParseDataType(t);
    if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("--dtype: ", v.status().message()));
    s.dtypes.push_back(*v);
  }
  auto lo = ParseBytes(a.min_bytes);
  if (!lo.ok()) return absl::InvalidArgumentError(absl::StrCat("--min-bytes: ", lo.status().message()));
  auto hi = ParseBytes(a.max_bytes);
  if (!hi.ok()) return absl::InvalidArgumentError(absl::StrCat("--max-bytes: ", hi.status().message()));
  s.min_bytes = *lo;
  s.max_bytes = *hi;
  if (!a.range.empty()) {
    // One entry's range: its powers of two are measured and the winners cover exactly [LO, HI); an open HI
    // measures up to --max-bytes (at least LO).
    auto r = ParseByteRange(a.range);
    if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("--range: ", r.status().message()));
    s.exact_range = *r;
    s.min_bytes = r->min;
    s.max_bytes = r->max == kUnbounded ? std::max(r->min, *hi) : r->max - 1;
  }
  s.step = a.step;
  for (absl::string_view x : absl::StrSplit(a.algo, ',', absl::SkipEmpty())) {
    auto cfg = Configuration::Default(x);
    if (!cfg.ok()) return absl::InvalidArgumentError(absl::StrCat("--algo: ", cfg.status().message()));
    s.algorithms.emplace_back(x);
  }
  for (absl::string_view x : absl::StrSplit(a.links, ',', absl::SkipEmpty())) {
    auto l = ParseLink(x);
    if (!l.ok()) return absl::InvalidArgumentError(absl::StrCat("--links: ", l.status().message()));
    s.links.emplace_back(x);
  }
  s.search.exhaustive = a.exhaustive;
  s.search.target_rel_ci = a.ci;
  s.search.cap_us = a.cap_ms * 1e3;
  s.search.max_iters = a.max_iters;
  if (a.ci <= 0 || a.ci >= 1) return absl::InvalidArgumentError(absl::StrCat("--ci must be in (0, 1), got ", a.ci));
  if (a.cap_ms <= 0) return absl::InvalidArgumentError(absl::StrCat("--cap-ms must be > 0, got ", a.cap_ms));
  if (absl::Status st = s.Validate(); !st.ok()) return st;
  return s;
}

void PrintOutcome(const sweep::SweepOutcome& o, const std::string& where, const std::string& fingerprint,
                  bool as_json) {
  const auto& st = o.stats;
  const double saved_pct = st.measured_us + st.saved_us > 0 ? 100 * st.saved_us / (st.measured_us + st.saved_us) : 0;
  if (as_json) {
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : o.entries) entries.push_back(EntryJson(e));
    std::cout << nlohmann::json{{"event", "done"},
                                {"sweep_id", o.sweep_id},
                                {"table_version", o.table_version},
                                {"topology", fingerprint},
                                {"stored_in", where},
                                {"seconds", o.seconds},
                                {"candidates", st.candidates},
                                {"pruned", st.pruned},
                                {"iterations", st.iterations},
                                {"replayed_iterations", o.replayed_iterations},
                                {"measured_s", st.measured_us / 1e6},
                                {"pruning_saved_s", st.saved_us / 1e6},
                                {"entries", entries}}
                     .dump()
              << std::endl;
    return;
  }
  std::printf(
      "# sweep %s: %.1f s, %llu candidate measurements, %llu iterations%s\n", o.sweep_id.c_str(), o.seconds,
      static_cast<unsigned long long>(st.candidates), static_cast<unsigned long long>(st.iterations),
      o.replayed_iterations ? absl::StrCat(" (", o.replayed_iterations, " replayed from the journal)").c_str() : "");
  if (!o.spec.search.exhaustive) {
    std::printf("# pruning: %llu of %llu candidates stopped early; saved about %.1f s of measuring (%.0f%%)\n",
                static_cast<unsigned long long>(st.pruned), static_cast<unsigned long long>(st.candidates),
                st.saved_us / 1e6, saved_pct);
  }
  std::printf("# winners stored in %s, table version %lld, topology %s\n", where.c_str(),
              static_cast<long long>(o.table_version), fingerprint.c_str());
  PrintEntriesTable(o.entries, stdout);
  std::fflush(stdout);
}

struct Storage {
  OpenedStore tables;
  std::unique_ptr<db::TuningStore> journal_owned;
  db::TuningStore* journal = nullptr;
  std::string where;
};

absl::StatusOr<Storage> OpenStorage(const SweepArgs& a) {
  Storage s;
  auto t = OpenStore(a.store);
  if (!t.ok()) return t.status();
  s.tables = *std::move(t);
  s.where = s.tables.where;
  if (!a.store.db.empty()) {
    s.journal = s.tables.store.get();
    return s;
  }
  if (auto probe = s.tables.store->ListTables(); !probe.ok()) {
    return absl::UnavailableError(absl::StrCat("no daemon answers at ", s.tables.where, " (", probe.status().message(),
                                               "); start hccl-tuned, pass --daemon TARGET, or use --db PATH"));
  }
  if (!a.no_table) {  // before measuring: the winners could not be stored
    if (absl::Status f = s.tables.remote->CheckTopologyFormat("store the sweep's winners"); !f.ok()) return f;
  }
  if (a.journal.empty()) {
    // The default: samples and progress through the daemon, committed as the sweep goes.
    s.journal = s.tables.store.get();
    return s;
  }
  auto path = ResolveJournal(a.journal);
  if (!path.ok()) return path.status();
  auto j = db::OpenSqliteTuningStore(*path);
  if (!j.ok()) return j.status();
  s.journal_owned = *std::move(j);
  s.journal = s.journal_owned.get();
  s.where = absl::StrCat(s.where, " (samples in ", *path, ")");
  return s;
}

int RunLaunched(const SweepArgs& a) {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  auto env = Environment::Load();
  if (!env.ok()) return ReportError(env.status());
  bench::NameRankProcess(env->rank);
  auto spec = SpecFromArgs(a);
  if (!spec.ok()) return ReportError(spec.status());
  auto comm = Communicator::FromEnvironment(*env);
  if (!comm.ok()) {
    return ReportError(absl::Status(comm.status().code(),
                                    absl::StrCat("rank ", env->rank.value_or(-1), ": ", comm.status().message())));
  }
  Communicator& c = **comm;
  sweep::RankZeroIo io;
  Storage storage;
  absl::Status open_error;
  if (c.rank() == 0) {
    auto s = OpenStorage(a);
    if (!s.ok()) {
      open_error = s.status();
    } else {
      storage = *std::move(s);
      io.journal = storage.journal;
      io.tables = storage.tables.store.get();
      io.resume = !a.resume.empty();
      io.store_table = !a.no_table;
      io.sweep_id = !a.resume.empty() ? a.resume : !a.sweep_id.empty() ? a.sweep_id : sweep::NewSweepId();
      if (!a.checked && io.resume && !a.force) {
        // Not while its owner still runs it (RunSweep reports a row that does not exist).
        if (auto row = io.journal->GetSweep(io.sweep_id); row.ok())
          open_error = sweep::CheckResumable(*row, db::NowUnixMs());
      }
      if (!a.checked && open_error.ok()) {
        auto q = CheckQuiet(io.journal, storage.tables.remote, io.sweep_id);
        if (!q.warning.empty()) std::fprintf(stderr, "hccl-tune sweep: warning: %s\n", q.warning.c_str());
        if (q.refuse && !a.force)
          open_error = absl::FailedPreconditionError(
              absl::StrCat("refusing to sweep a busy node (", q.warning, "); pass --force to sweep anyway"));
      }
    }
    if (!open_error.ok()) io.journal = io.tables = nullptr;
  }
  io.stop = &g_stop;
  ProgressPrinter printer(a.json, a.plain);
  io.on_progress = [&](const sweep::Progress& p) { printer(p); };
  auto out = sweep::RunSweep(c, *spec, io);
  if (!out.ok()) {
    const absl::Status& err = !open_error.ok() ? open_error : out.status();
    if (c.rank() == 0) {
      if (absl::IsCancelled(err)) {
        std::fprintf(stderr, "\nhccl-tune sweep: stopped; continue with: hccl-tune sweep --resume %s%s\n",
                     io.sweep_id.c_str(), a.store.db.empty() ? "" : absl::StrCat(" --db ", a.store.db).c_str());
        return 130;
      }
      return ReportError(err);
    }
    if (absl::IsCancelled(err)) return 130;
    return absl::IsAborted(err) ? bench::ReportRankFailure(err, 1) : ReportError(err);
  }
  // Every other node's first local rank hands the winners to its own node's store; a node left without the
  // table fails the job (exit 1) so a launcher sees it.
  int rc = 0;
  if (c.rank() != 0 && c.local_rank() == 0 && !out->entries.empty() && !a.no_table) {
    auto t = OpenStore(a.store);
    absl::Status s = t.status();
    if (t.ok()) {
      s = sweep::PutMerged(*t->store, db::Topology{c.fingerprint(), c.topology_json()}, out->entries).status();
    }
    if (!s.ok()) {
      std::fprintf(stderr, "hccl-tune sweep: rank %d: storing the winners on this node: %s\n", c.rank(),
                   std::string(s.message()).c_str());
      rc = 1;
    }
  }
  if (c.rank() == 0) PrintOutcome(*out, storage.where, c.fingerprint(), a.json);
  (void)c.Barrier();
  return rc;
}

int RunLocal(SweepArgs a) {
  if (a.ranks < 1 || a.ranks > 256) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat("--ranks must be between 1 and 256, got ", a.ranks)));
  }
  auto spec = SpecFromArgs(a);
  if (!spec.ok()) return ReportError(spec.status());
  {
    // Storage is reachable and the node is quiet before any process starts.
    auto s = OpenStorage(a);
    if (!s.ok()) return ReportError(s.status());
    if (!a.resume.empty()) {
      auto row = s->journal->GetSweep(a.resume);
      if (!row.ok()) return ReportError(row.status());
      // Not while its owner still runs it: two processes would write one sweep's samples and table.
      if (!a.force) {
        if (absl::Status busy = sweep::CheckResumable(*row, db::NowUnixMs()); !busy.ok()) return ReportError(busy);
      }
      auto params = nlohmann::json::parse(row->params_json, nullptr, false);
      if (!params.is_discarded()) a.ranks = JsonOr(params, "world", a.ranks);
    }
    // The id comes from --resume, else from the caller (hccl-tuned names the sweeps it runs), else a new one.
    a.sweep_id = !a.resume.empty() ? a.resume : !a.sweep_id.empty() ? a.sweep_id : sweep::NewSweepId();
    auto q = CheckQuiet(s->journal, s->tables.remote, a.sweep_id);
    if (!q.warning.empty()) std::fprintf(stderr, "hccl-tune sweep: warning: %s\n", q.warning.c_str());
    if (q.refuse && !a.force) {
      return ReportError(absl::FailedPreconditionError(
          absl::StrCat("refusing to sweep a busy node (", q.warning, "); pass --force to sweep anyway")));
    }
  }
  bench::SpawnOptions so;
  so.ranks = a.ranks;
  // A sweep's length grows with its range and its candidates: no deadline for the whole job. A rank that stops
  // making progress is still ended: its peers fail after HCCL_EXEC_TIMEOUT and the job ends after the grace.
  so.timeout = absl::InfiniteDuration();
  so.args = {"sweep",
             "--launched",
             "--checked",
             "--coll",
             a.coll,
             "--dtype",
             a.dtype,
             "--max-bytes",
             a.max_bytes,
             "--step",
             std::to_string(a.step),
             "--ci",
             absl::StrCat(a.ci),
             "--cap-ms",
             absl::StrCat(a.cap_ms),
             "--max-iters",
             std::to_string(a.max_iters),
             "--sweep-id",
             a.sweep_id};
  if (!a.algo.empty()) so.args.insert(so.args.end(), {"--algo", a.algo});
  if (!a.links.empty()) so.args.insert(so.args.end(), {"--links", a.links});
  // --range sets the smallest size itself (and excludes --min-bytes).
  so.args.insert(so.args.end(), {a.range.empty() ? "--min-bytes" : "--range", a.range.empty() ? a.min_bytes : a.range});
  if (a.no_table) so.args.push_back("--no-table");
  if (!a.resume.empty()) so.args.insert(so.args.end(), {"--resume", a.resume});
  if (!a.store.db.empty()) so.args.insert(so.args.end(), {"--db", a.store.db});
  if (!a.store.daemon.empty()) so.args.insert(so.args.end(), {"--daemon", a.store.daemon});
  if (!a.journal.empty()) so.args.insert(so.args.end(), {"--journal", a.journal});
  if (a.exhaustive) so.args.push_back("--exhaustive");
  if (a.json) so.args.push_back("--json");
  if (a.plain) so.args.push_back("--plain");
  // Ctrl-C reaches every rank (same process group); rank 0 stops the sweep cleanly, so the spawner waits.
  ::signal(SIGINT, SIG_IGN);
  absl::Status s = bench::SpawnLocalRanks(so);
  ::signal(SIGINT, SIG_DFL);
  if (!s.ok()) {
    if (absl::IsCancelled(s)) return 130;
    std::fprintf(stderr, "hccl-tune sweep: %s\n", std::string(s.message()).c_str());
    // The machine-readable end for whoever runs this sweep (hccl-tuned): why it failed, as said above.
    if (a.json)
      std::cout << nlohmann::json{{"event", "failed"}, {"sweep_id", a.sweep_id}, {"message", s.message()}}.dump(
                       -1, ' ', false, nlohmann::json::error_handler_t::replace)
                << std::endl;
    return absl::IsInvalidArgument(s) ? 2 : 1;
  }
  return 0;
}

// `--runtime openmpi|mpich`: the library's own algorithms, measured by an MPI job of its bench (tuner/peers/).
int RunPeer(const SweepArgs& a) {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  peers::PeerSweepSpec ps;
  ps.runtime = a.runtime;
  ps.ranks = a.ranks;
  if (!a.links.empty()) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat("--links does not apply to --runtime ", a.runtime)));
  }
  SweepArgs own = a;
  own.algo.clear();  // the library's names, checked against the library by the sweep
  auto spec = SpecFromArgs(own);
  if (!spec.ok()) return ReportError(spec.status());
  ps.spec = *spec;
  for (absl::string_view x : absl::StrSplit(a.algo, ',', absl::SkipEmpty())) ps.spec.algorithms.emplace_back(x);
  auto storage = OpenStorage(a);
  if (!storage.ok()) return ReportError(storage.status());
  peers::PeerSweepIo io;
  io.journal = storage->journal;
  io.tables = storage->tables.store.get();
  io.resume = !a.resume.empty();
  io.store_table = !a.no_table;
  io.sweep_id = !a.resume.empty() ? a.resume : !a.sweep_id.empty() ? a.sweep_id : sweep::NewSweepId();
  io.stop = &g_stop;
  if (io.resume && !a.force) {
    auto row = io.journal->GetSweep(io.sweep_id);
    if (!row.ok()) return ReportError(row.status());
    if (absl::Status busy = sweep::CheckResumable(*row, db::NowUnixMs()); !busy.ok()) return ReportError(busy);
  }
  auto q = CheckQuiet(io.journal, storage->tables.remote, io.sweep_id);
  if (!q.warning.empty()) std::fprintf(stderr, "hccl-tune sweep: warning: %s\n", q.warning.c_str());
  if (q.refuse && !a.force) {
    return ReportError(absl::FailedPreconditionError(
        absl::StrCat("refusing to sweep a busy node (", q.warning, "); pass --force to sweep anyway")));
  }
  ProgressPrinter printer(a.json, a.plain);
  io.on_progress = [&](const sweep::Progress& p) { printer(p); };
  auto out = peers::RunPeerSweep(ps, io);
  if (!out.ok()) {
    if (absl::IsCancelled(out.status())) {
      std::fprintf(stderr, "\nhccl-tune sweep: stopped; continue with: hccl-tune sweep --runtime %s --resume %s%s\n",
                   a.runtime.c_str(), io.sweep_id.c_str(),
                   a.store.db.empty() ? "" : absl::StrCat(" --db ", a.store.db).c_str());
      return 130;
    }
    return ReportError(out.status());
  }
  PrintOutcome(out->outcome, storage->where, out->topology.fingerprint, a.json);
  return 0;
}

// The StartSweep request for these options; names are checked by the daemon's sweep process as for a local one.
v1::StartSweepRequest DaemonSweepRequest(const SweepArgs& a) {
  v1::StartSweepRequest r;
  r.set_ranks(a.ranks);
  for (absl::string_view x : absl::StrSplit(a.coll, ',', absl::SkipEmpty())) r.add_collectives(std::string(x));
  for (absl::string_view x : absl::StrSplit(a.dtype, ',', absl::SkipEmpty())) r.add_dtypes(std::string(x));
  for (absl::string_view x : absl::StrSplit(a.algo, ',', absl::SkipEmpty())) r.add_algorithms(std::string(x));
  for (absl::string_view x : absl::StrSplit(a.links, ',', absl::SkipEmpty())) r.add_links(std::string(x));
  if (auto lo = ParseBytes(a.min_bytes); lo.ok()) r.set_min_bytes(*lo);
  if (auto hi = ParseBytes(a.max_bytes); hi.ok()) r.set_max_bytes(*hi);
  r.set_step(a.step);
  r.set_exhaustive(a.exhaustive);
  r.set_ci(a.ci);
  r.set_cap_ms(a.cap_ms);
  r.set_max_iters(a.max_iters);
  r.set_resume(a.resume);
  r.set_force(a.force);
  return r;
}

}  // namespace

void RegisterSweep(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<SweepArgs>();
  auto* cmd = app.add_subcommand("sweep", "Measure every candidate configuration and store the winners");
  cmd->add_option("--ranks", a->ranks, "Local ranks to spawn")->capture_default_str();
  cmd->add_option("--coll", a->coll, "Collectives, comma-separated")->capture_default_str();
  cmd->add_option("--dtype", a->dtype, "Data types, comma-separated")->capture_default_str();
  auto* min_opt = cmd->add_option("--min-bytes", a->min_bytes, "Smallest size (K/M/G suffixes)")->capture_default_str();
  cmd->add_option("--max-bytes", a->max_bytes, "Largest size")->capture_default_str();
  cmd->add_option("--range", a->range,
                  "Only one table entry's byte range, LO-HI (half-open; LO- = open): its powers of two are measured "
                  "and the winners cover exactly that range (an open range measures up to --max-bytes)")
      ->excludes(min_opt);
  cmd->add_flag("--no-table", a->no_table,
                "Measure and print the winners (--json: the done event) but do not store them in the table");
  cmd->add_option("--step", a->step, "Factor between measured sizes (power of two)")->capture_default_str();
  cmd->add_option("--algo", a->algo, "Only these algorithms, comma-separated (default: every valid one)");
  cmd->add_option("--links", a->links, "Links to try, comma-separated (default: shm,tcp on one node)");
  cmd->add_flag("--exhaustive", a->exhaustive, "Measure every candidate to the end (no pruning)");
  cmd->add_option("--ci", a->ci, "Target half-width of the median's 95% CI, relative")->capture_default_str();
  cmd->add_option("--cap-ms", a->cap_ms, "Measuring time cap per candidate and size (ms)")->capture_default_str();
  cmd->add_option("--max-iters", a->max_iters, "Iteration cap per candidate and size")->capture_default_str();
  cmd->add_option("--resume", a->resume, "Continue this sweep id from its kept samples");
  cmd->add_option("--journal", a->journal,
                  "With the daemon: keep samples/progress in this file instead (default: in the daemon's database)");
  cmd->add_option("--sweep-id", a->sweep_id, "Sweep id (set by the spawner or hccl-tuned)")->group("");
  cmd->add_flag("--checked", a->checked, "Quiet check already done (set by the spawner)")->group("");
  cmd->add_flag("--force", a->force, "Sweep even when the node is busy");
  cmd->add_flag("--json", a->json, "Progress and result as JSON lines on stdout");
  cmd->add_flag("--plain", a->plain, "Plain progress lines even on a terminal");
  cmd->add_option("--runtime", a->runtime,
                  "Sweep another MPI library's own algorithms: openmpi or mpich (--ranks local ranks under its "
                  "launcher; --algo takes its names)");
  cmd->add_flag("--launched", a->launched, "Join a job started by torchrun/srun/mpirun instead of spawning ranks");
  AddStoreFlags(cmd, &a->store);
  AddDaemonSweepFlags(cmd, &a->via);
  cmd->callback([a, exit_code] {
    if (!a->runtime.empty() && a->runtime != kOwnRuntime) {
      if (a->launched || a->via.active()) {
        *exit_code = ReportError(absl::InvalidArgumentError(
            "--runtime starts the library's own launcher: not with --launched or through the daemon"));
        return;
      }
      *exit_code = RunPeer(*a);
      return;
    }
    if (a->via.active()) {
      if (a->via.via && a->resume.empty()) {
        if (auto spec = SpecFromArgs(*a); !spec.ok()) {  // the same errors as a local sweep, before asking the daemon
          *exit_code = ReportError(spec.status());
          return;
        }
      }
      if (!a->range.empty() || a->no_table) {
        *exit_code = ReportError(absl::InvalidArgumentError(
            "--range and --no-table are not passed through the daemon (--via-daemon, --watch, --cancel): run the "
            "sweep without --via-daemon"));
        return;
      }
      if (a->launched || !a->store.db.empty() || !a->journal.empty()) {
        *exit_code = ReportError(absl::InvalidArgumentError(
            "--via-daemon, --watch and --cancel work through the daemon: not with --launched, --db or --journal"));
        return;
      }
      *exit_code = RunViaDaemon(a->via, DaemonSweepRequest(*a), a->store, a->json, a->plain);
      return;
    }
    *exit_code = a->launched ? RunLaunched(*a) : RunLocal(*a);
  });
}

}  // namespace hccltune::cli

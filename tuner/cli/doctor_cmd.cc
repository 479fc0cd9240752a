// `hccl-tune doctor --dump DIR | --job ID [--daemon T]... [--daemon-port P] [--db PATH] [--timeout S] [--out DIR]
// [--hang-after S]
// [--json]`: findings from flight-recorder dumps, most costly first, each with its evidence and fix
// (tuner/doctor/dump_doctor.h, docs/TROUBLESHOOTING.md). --dump reads a directory of dumps; --job has hccl-tuned
// make every rank of a running job dump (tuner/cli/job_view.h) — through this node's daemon and, for a job on several
// nodes, each other node's daemon found from the job (tuner/cli/job_discovery.h), or through each --daemon — writes
// the dumps to --out (default: a temporary directory, removed) and reads them the same way. Ranks that sent no dump are
// listed on stderr. Tuned tables for the algorithm check come from --db, else the first --daemon, else the node's
// daemon (discovery) unless HCCL_TUNE_DAEMON=off. Exit status: 0 when the dumps were read (whatever they show), 1 when
// they could not be, 2 on bad arguments.
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/job_discovery.h"
#include "tuner/cli/job_view.h"
#include "tuner/cli/store_access.h"
#include "tuner/doctor/dump_doctor.h"

namespace hccltune::cli {
namespace {

struct DoctorArgs {
  std::string dump, job, out, db;
  std::vector<std::string> daemons;
  int daemon_port = 0;
  double timeout_s = 5;
  double hang_after_s = 5;
  bool json = false;
};

void PrintJson(const std::vector<doctor::Finding>& findings) {
  nlohmann::json out = nlohmann::json::array();
  for (const doctor::Finding& f : findings) {
    out.push_back({{"severity", doctor::SeverityName(f.severity)},
                   {"kind", f.kind},
                   {"title", f.title},
                   {"cost_s", f.cost},
                   {"evidence", f.evidence},
                   {"fix", f.fix}});
  }
  std::cout << out.dump(2) << "\n";
}

int Fail(absl::string_view message) {
  std::fprintf(stderr, "hccl-tune doctor: %s\n", std::string(message).c_str());
  return 1;
}

// --job: the daemons to ask: each --daemon, else the node's daemon and the other nodes' found from the job.
absl::StatusOr<std::vector<std::string>> JobDaemonTargets(const DoctorArgs& a) {
  std::vector<std::string> targets;
  for (const std::string& d : a.daemons) {
    auto t = JobViewTarget(d);
    if (!t.ok()) return t.status();
    targets.push_back(*t);
  }
  if (!targets.empty()) return targets;
  auto local = JobViewTarget("");
  if (!local.ok()) return local.status();
  auto found = FindJobDaemons(*local, a.job, a.daemon_port);
  if (!found.ok()) return found.status();
  for (const std::string& note : found->notes) std::fprintf(stderr, "hccl-tune doctor: %s\n", note.c_str());
  return found->targets;
}

// --job: the dumps of the job's ranks into a directory (a.out, or a temporary one *made sets).
absl::StatusOr<std::string> FetchJobDumps(const DoctorArgs& a, std::string* made) {
  auto targets = JobDaemonTargets(a);
  if (!targets.ok()) return targets.status();
  std::string dir = a.out;
  if (dir.empty()) {
    std::string templ = "/tmp/hccl-tune-doctor-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) return absl::InternalError("cannot make a temporary directory");
    dir = *made = templ;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--out ", dir, ": ", ec.message()));
  }
  auto got = CollectJobDumps(*targets, a.job, absl::Seconds(a.timeout_s), dir);
  if (!got.ok()) return got.status();
  for (const std::string& note : got->notes) std::fprintf(stderr, "hccl-tune doctor: no dump from %s\n", note.c_str());
  if (got->files.empty()) return absl::UnavailableError(absl::StrCat("no rank of job ", a.job, " sent a dump"));
  return dir;
}

// Where the algorithm check reads tuned tables: --db, else the first --daemon, else discovery. Optional: without
// one (the daemon off) the check names overrides only; a named one that cannot be opened is an error. The doctor only
// reads: a --db that does not exist is an error, not a new empty database.
absl::Status OpenTables(const DoctorArgs& a, OpenedStore* opened, doctor::DoctorOptions* options) {
  if (!a.db.empty() && access(a.db.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("--db ", a.db, ": ", strerror(errno)));
  }
  StoreFlags flags;
  flags.db = a.db;
  if (a.db.empty() && !a.daemons.empty()) flags.daemon = a.daemons.front();
  auto store = OpenStore(flags);
  if (!store.ok()) return !flags.db.empty() || !flags.daemon.empty() ? store.status() : absl::OkStatus();
  *opened = *std::move(store);
  options->store = opened->store.get();
  options->store_name = opened->where;
  return absl::OkStatus();
}

int RunDoctor(const DoctorArgs& a) {
  doctor::DoctorOptions options;
  options.hang_after_s = a.hang_after_s;
  OpenedStore tables;
  if (absl::Status s = OpenTables(a, &tables, &options); !s.ok()) return Fail(s.message());
  std::string dir = a.dump, made;
  if (!a.job.empty()) {
    auto fetched = FetchJobDumps(a, &made);
    if (!fetched.ok()) {
      if (!made.empty()) std::filesystem::remove_all(made);
      return Fail(fetched.status().message());
    }
    dir = *fetched;
  }
  auto findings = doctor::DiagnoseDumpDir(dir, options);
  if (!made.empty()) std::filesystem::remove_all(made);
  if (!findings.ok()) return Fail(findings.status().message());
  if (a.json) {
    PrintJson(*findings);
  } else {
    std::cout << doctor::FormatFindings(*findings);
  }
  return 0;
}

}  // namespace

void RegisterDoctor(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor", "Diagnose a job from its flight-recorder dumps");
  auto* dump = cmd->add_option("--dump", a->dump, "Directory of dumps (HCCL_TUNE_FR_DUMP_DIR)");
  auto* job = cmd->add_option("--job", a->job, "A running job (hccl-tune jobs): hccl-tuned has its ranks dump");
  dump->excludes(job);
  cmd->add_option("--daemon", a->daemons,
                  "hccl-tuned target, repeatable: with --job the daemons to ask (one per node; default: this node's "
                  "and, for a job on several nodes, each other node's at its address and --daemon-port); "
                  "the first also serves the tables (unless --db)");
  cmd->add_option("--daemon-port", a->daemon_port,
                  "With --job and no --daemon: the TCP port of the other nodes' daemons (default: this node's "
                  "daemon's listener port)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--db", a->db, "Read tuned tables from this database file (the algorithm check)");
  cmd->add_option("--timeout", a->timeout_s, "With --job: seconds to wait for the ranks' dumps")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 60.0));
  cmd->add_option("--out", a->out, "With --job: keep the dumps in this directory");
  cmd->add_option("--hang-after", a->hang_after_s, "Seconds a call must have been blocked to count as stuck")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a, exit_code] {
    if (a->dump.empty() == a->job.empty()) {
      std::fprintf(stderr, "hccl-tune doctor: give --dump DIR or --job ID\n");
      *exit_code = 2;
      return;
    }
    *exit_code = RunDoctor(*a);
  });
}

}  // namespace hccltune::cli

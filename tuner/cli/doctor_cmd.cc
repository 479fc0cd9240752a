// `hccl-tune doctor --dump DIR [--hang-after S] [--db PATH | --daemon TARGET] [--json]`: findings from a directory
// of flight-recorder dumps, most costly first, each with its evidence and fix (tuner/doctor/dump_doctor.h,
// docs/TROUBLESHOOTING.md). Tuned tables for the algorithm check come from --db, --daemon, or the node's daemon
// (discovery) unless HCCL_TUNE_DAEMON=off.
// Exit status: 0 when the dumps were read (whatever they show), 1 when they could not be, 2 on bad arguments.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"
#include "tuner/doctor/dump_doctor.h"

namespace hccltune::cli {
namespace {

struct DoctorArgs {
  std::string dump;
  double hang_after_s = 5;
  bool json = false;
  StoreFlags store;
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

}  // namespace

void RegisterDoctor(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor", "Diagnose a job from its flight-recorder dumps");
  cmd->add_option("--dump", a->dump, "Directory of dumps (HCCL_TUNE_FR_DUMP_DIR)")->required();
  cmd->add_option("--hang-after", a->hang_after_s, "Seconds a call must have been blocked to count as stuck")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", a->json, "Print JSON");
  AddStoreFlags(cmd, &a->store);
  cmd->callback([a, exit_code] {
    doctor::DoctorOptions options;
    options.hang_after_s = a->hang_after_s;
    // A store is optional: without one (the daemon off) the algorithm check names overrides only. The doctor only
    // reads: a --db that does not exist is an error, not a new empty database.
    if (!a->store.db.empty() && access(a->store.db.c_str(), R_OK) != 0) {
      *exit_code = ReportError(absl::NotFoundError(absl::StrCat("--db ", a->store.db, ": ", strerror(errno))));
      return;
    }
    auto opened = OpenStore(a->store);
    if (opened.ok()) {
      options.store = opened->store.get();
      options.store_name = opened->where;
    } else if (!a->store.db.empty() || !a->store.daemon.empty()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto findings = doctor::DiagnoseDumpDir(a->dump, options);
    if (!findings.ok()) {
      std::fprintf(stderr, "hccl-tune doctor: %s\n", std::string(findings.status().message()).c_str());
      *exit_code = 1;
      return;
    }
    if (a->json) {
      PrintJson(*findings);
    } else {
      std::cout << doctor::FormatFindings(*findings);
    }
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli

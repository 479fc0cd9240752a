// hccl-tune: measure, store and inspect tuned collective configurations.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "hccltune/version.h"
#include "tuner/bench/rank_report.h"
#include "tuner/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"hccl-tune — measured algorithm choice for collective communication"};
  app.name("hccl-tune");
  app.set_version_flag("--version", std::string("hccl-tune ") + HCCL_TUNE_VERSION);
  app.require_subcommand(1);
  // Set by the spawning `hccl-tune` for the ranks it starts (tuner/bench/rank_report.h); not for people.
  app.add_option_function<int>(
         hccltune::bench::kReportFdOption, [](int fd) { hccltune::bench::SetReportFd(fd); },
         "Write this rank's failure to this descriptor")
      ->group("");
  int exit_code = 0;
  hccltune::cli::RegisterAlgorithms(app, &exit_code);
  hccltune::cli::RegisterBench(app, &exit_code);
  hccltune::cli::RegisterLinks(app, &exit_code);
  hccltune::cli::RegisterStatus(app, &exit_code);
  hccltune::cli::RegisterShow(app, &exit_code);
  hccltune::cli::RegisterGet(app, &exit_code);
  hccltune::cli::RegisterExport(app, &exit_code);
  hccltune::cli::RegisterImport(app, &exit_code);
  hccltune::cli::RegisterEnv(app, &exit_code);
  hccltune::cli::RegisterForget(app, &exit_code);
  hccltune::cli::RegisterRollback(app, &exit_code);
  hccltune::cli::RegisterSweep(app, &exit_code);
  hccltune::cli::RegisterVerify(app, &exit_code);
  hccltune::cli::RegisterReport(app, &exit_code);
  hccltune::cli::RegisterSimulate(app, &exit_code);
  hccltune::cli::RegisterModel(app, &exit_code);
  hccltune::cli::RegisterDoctor(app, &exit_code);
  hccltune::cli::RegisterJobs(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}

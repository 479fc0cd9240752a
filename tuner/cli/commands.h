// Sub-commands of the `hccl-tune` CLI. Each Register* adds its sub-command to the app and sets the
// callback that runs it; the callback stores its exit code in `*exit_code`.
#pragma once

#include "CLI/CLI.hpp"

namespace hccltune::cli {

void RegisterAlgorithms(CLI::App& app, int* exit_code);
void RegisterBench(CLI::App& app, int* exit_code);
void RegisterLinks(CLI::App& app, int* exit_code);
void RegisterStatus(CLI::App& app, int* exit_code);
void RegisterShow(CLI::App& app, int* exit_code);
void RegisterGet(CLI::App& app, int* exit_code);
void RegisterExport(CLI::App& app, int* exit_code);
void RegisterImport(CLI::App& app, int* exit_code);
void RegisterEnv(CLI::App& app, int* exit_code);
void RegisterForget(CLI::App& app, int* exit_code);
void RegisterRollback(CLI::App& app, int* exit_code);
void RegisterSweep(CLI::App& app, int* exit_code);
void RegisterVerify(CLI::App& app, int* exit_code);
void RegisterReport(CLI::App& app, int* exit_code);
void RegisterSimulate(CLI::App& app, int* exit_code);
void RegisterModel(CLI::App& app, int* exit_code);
void RegisterDoctor(CLI::App& app, int* exit_code);
void RegisterJobs(CLI::App& app, int* exit_code);

}  // namespace hccltune::cli

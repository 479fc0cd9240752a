// `hccl-tune forget` (delete a topology's table, every version) and `hccl-tune rollback` (make an earlier
// version the latest again, as a new version).
#include <iostream>
#include <memory>

#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

void RegisterForget(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("forget", "Delete a topology's tuned table (every version)");
  auto flags = std::make_shared<StoreFlags>();
  auto topology = std::make_shared<std::string>();
  cmd->add_option("--topology", *topology, "Topology fingerprint")->required();
  AddStoreFlags(cmd, flags.get());
  cmd->callback([flags, topology, exit_code] {
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto n = opened->store->DeleteTable(*topology);
    if (!n.ok()) {
      *exit_code = ReportError(n.status());
      return;
    }
    std::cout << "forgot topology " << *topology << " (" << *n << " versions)\n";
    *exit_code = 0;
  });
}

void RegisterRollback(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("rollback", "Restore an earlier version of a topology's table");
  auto flags = std::make_shared<StoreFlags>();
  auto topology = std::make_shared<std::string>();
  auto to = std::make_shared<int64_t>(0);
  cmd->add_option("--topology", *topology, "Topology fingerprint")->required();
  cmd->add_option("--to", *to, "Version to restore (default: the one before the latest)");
  AddStoreFlags(cmd, flags.get());
  cmd->callback([flags, topology, to, exit_code] {
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto v = opened->store->Rollback(*topology, *to);
    if (!v.ok()) {
      *exit_code = ReportError(v.status());
      return;
    }
    std::cout << "topology " << *topology << " is now version " << *v << "\n";
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli

// `hccl-tune status`: the daemon's (or a database file's) state.
#include <cstdio>
#include <iostream>
#include <memory>

#include "nlohmann/json.hpp"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

void RegisterStatus(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("status", "Show the tuning daemon's (or a database's) state");
  auto flags = std::make_shared<StoreFlags>();
  auto json = std::make_shared<bool>(false);
  AddStoreFlags(cmd, flags.get());
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([flags, json, exit_code] {
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    nlohmann::json out;
    if (opened->remote != nullptr) {
      auto st = opened->remote->DaemonStatus();
      if (!st.ok()) {
        *exit_code = ReportError(st.status());
        return;
      }
      out = {{"source", opened->where},
             {"library_version", st->library_version()},
             {"db_path", st->db_path()},
             {"db_bytes", st->db_bytes()},
             {"schema_version", st->schema_version()},
             {"tables", st->tables()},
             {"entries", st->entries()},
             {"live_samples", st->live_samples()},
             {"samples_dropped", st->samples_dropped()},
             {"samples_queued", st->samples_queued()},
             {"connected_clients", st->connected_clients()},
             {"uptime_s", st->uptime_s()}};
    } else {
      auto info = opened->store->Info();
      if (!info.ok()) {
        *exit_code = ReportError(info.status());
        return;
      }
      out = {{"source", opened->where},
             {"db_path", info->path},
             {"db_bytes", info->db_bytes},
             {"schema_version", info->schema_version},
             {"tables", info->tables},
             {"entries", info->entries},
             {"live_samples", info->live_samples}};
    }
    if (*json) {
      std::cout << out.dump(2) << "\n";
    } else {
      for (auto it = out.begin(); it != out.end(); ++it) {
        std::cout << it.key() << ": " << (it->is_string() ? it->get<std::string>() : it->dump()) << "\n";
      }
    }
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli

// `hccl-tune status`: the daemon's (or a database file's) state.
#include <cstdio>
#include <iostream>
#include <memory>

#include "nlohmann/json.hpp"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

void RegisterStatus(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("status", "Show the tuning daemon's (or a database's) state");
  auto flags = std::make_shared<StoreFlags>();
  auto json = std::make_shared<bool>(false);
  auto live = std::make_shared<bool>(false);
  AddStoreFlags(cmd, flags.get());
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->add_flag("--live", *live,
                "Also list live statistics per configuration (which configurations ran, how often, how fast)");
  cmd->callback([flags, json, live, exit_code] {
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
    if (*live) {
      // Live statistics live in the database; over a daemon, read its file (same node) directly.
      StoreFlags db_flags;
      db_flags.db = opened->remote != nullptr ? out["db_path"].get<std::string>() : flags->db;
      auto db = opened->remote != nullptr ? OpenStore(db_flags) : absl::StatusOr<OpenedStore>(std::move(*opened));
      if (!db.ok()) {
        *exit_code = ReportError(db.status());
        return;
      }
      auto tables = db->store->ListTables();
      if (!tables.ok()) {
        *exit_code = ReportError(tables.status());
        return;
      }
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& t : *tables) {
        auto stats = db->store->GetLiveStats(t.topology.fingerprint);
        if (!stats.ok()) continue;
        for (const auto& l : *stats) {
          rows.push_back({{"topology", l.fingerprint},
                          {"collective", std::string(CollectiveName(l.collective))},
                          {"dtype", std::string(DataTypeName(l.dtype))},
                          {"world_size", l.world_size},
                          {"bytes", FormatByteRange(l.bucket)},
                          {"configuration", l.configuration},
                          {"count", l.count},
                          {"median_us", l.median_us},
                          {"p90_us", l.p90_us}});
        }
      }
      out["live"] = rows;
    }
    if (*json) {
      std::cout << out.dump(2) << "\n";
    } else {
      for (auto it = out.begin(); it != out.end(); ++it) {
        if (it.key() == "live") continue;
        std::cout << it.key() << ": " << (it->is_string() ? it->get<std::string>() : it->dump()) << "\n";
      }
      if (out.contains("live")) {
        std::cout << "live statistics (calls per configuration):\n";
        for (const auto& r : out["live"]) {
          std::printf("  %s %-13s %-5s world %-3d %-10s %-55s calls %-8llu median %.2f us\n",
                      r["topology"].get<std::string>().c_str(), r["collective"].get<std::string>().c_str(),
                      r["dtype"].get<std::string>().c_str(), r["world_size"].get<int>(),
                      r["bytes"].get<std::string>().c_str(), r["configuration"].get<std::string>().c_str(),
                      static_cast<unsigned long long>(r["count"].get<uint64_t>()), r["median_us"].get<double>());
        }
      }
    }
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli

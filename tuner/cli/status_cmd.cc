// `hccl-tune status`: the daemon's (or a database file's) state.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "db/sqlite_store.h"
#include "nlohmann/json.hpp"
#include "runtime/common/fingerprint.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {
namespace {

// The database hccl-tuned at `target` reports as `path`, opened here without creating anything: only when the
// daemon is on this node (a unix socket or a loopback address), the path is absolute and names an existing file.
absl::StatusOr<std::unique_ptr<db::TuningStore>> OpenDaemonDatabase(const std::string& target,
                                                                    const std::string& path) {
  constexpr absl::string_view how = "; run hccl-tune status --live --db PATH on the daemon's node instead";
  std::string host = target;
  if (absl::StartsWith(host, "dns:///")) host = host.substr(7);
  host = host.substr(0, host.rfind(':'));
  const bool local = absl::StartsWith(target, "unix:") || host == "localhost" || host == "127.0.0.1" ||
                     host == "[::1]" || absl::StartsWith(host, "127.");
  if (!local) {
    return absl::FailedPreconditionError(absl::StrCat("live statistics are not served over gRPC, and hccl-tuned at ",
                                                      target, " may be on another host: its database ", path,
                                                      " is not read here", how));
  }
  if (path.empty() || path[0] != '/') {
    return absl::FailedPreconditionError(absl::StrCat("hccl-tuned at ", target, " reports its database as '", path,
                                                      "', relative to the daemon's working directory", how));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("cannot read the database of hccl-tuned at ", target, ": ", path, ": ",
                                            std::strerror(errno), how));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the database of hccl-tuned at ", target, ", ", path, ", is not a regular file"));
  }
  if (::access(path.c_str(), R_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot read the database of hccl-tuned at ", target, ": ", path, ": ", std::strerror(errno)));
  }
  return db::OpenSqliteTuningStore(path);
}

// The topology classes of `tables`, each with its class JSON and the fingerprints of its tables.
nlohmann::json Classes(const std::vector<db::TableSummary>& tables) {
  std::map<std::string, nlohmann::json> by_class;
  for (const db::TableSummary& t : tables) {
    const std::string c = t.topology.topology_class.empty() ? "-" : t.topology.topology_class;
    nlohmann::json& entry = by_class[c];
    if (entry.is_null()) {
      auto d = ParseTopologyJson(t.topology.json);
      entry = {{"class", c}, {"topology", d.ok() ? TopologyClassJson(*d) : ""}, {"tables", nlohmann::json::array()}};
    }
    entry["tables"].push_back(t.topology.fingerprint);
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [c, entry] : by_class) out.push_back(std::move(entry));
  return out;
}

}  // namespace

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
             {"uptime_s", st->uptime_s()},
             {"topology_format", st->topology_format() == 0 ? 1 : st->topology_format()}};
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
             {"live_samples", info->live_samples},
             {"topology_format", kTopologyFormat}};
    }
    {
      auto tables = opened->store->ListTables();
      if (!tables.ok()) {
        *exit_code = ReportError(tables.status());
        return;
      }
      out["classes"] = Classes(*tables);
    }
    bool live_errors = false;
    if (*live) {
      // Live statistics live in the database and are not served over gRPC; over a daemon, read its file here.
      std::unique_ptr<db::TuningStore> daemon_db;
      db::TuningStore* store = opened->store.get();
      if (opened->remote != nullptr) {
        auto file = OpenDaemonDatabase(opened->remote->target(), out["db_path"].get<std::string>());
        if (!file.ok()) {
          *exit_code = ReportError(file.status());
          return;
        }
        daemon_db = *std::move(file);
        store = daemon_db.get();
      }
      auto tables = store->ListTables();
      if (!tables.ok()) {
        *exit_code = ReportError(tables.status());
        return;
      }
      nlohmann::json rows = nlohmann::json::array();
      nlohmann::json errors = nlohmann::json::array();
      for (const auto& t : *tables) {
        auto stats = store->GetLiveStats(t.topology.fingerprint);
        if (!stats.ok()) {  // named, not skipped: the other topologies are still listed
          errors.push_back({{"topology", t.topology.fingerprint}, {"error", std::string(stats.status().message())}});
          std::fprintf(stderr, "hccl-tune: live statistics of topology %s: %s\n", t.topology.fingerprint.c_str(),
                       std::string(stats.status().message()).c_str());
          continue;
        }
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
      if (!errors.empty()) {
        out["live_errors"] = errors;
        live_errors = true;
      }
    }
    if (*json) {
      std::cout << out.dump(2) << "\n";
    } else {
      for (auto it = out.begin(); it != out.end(); ++it) {
        if (it.key() == "live" || it.key() == "live_errors" || it.key() == "classes") continue;
        std::cout << it.key() << ": " << (it->is_string() ? it->get<std::string>() : it->dump()) << "\n";
      }
      std::cout << "topology classes: " << out["classes"].size() << "\n";
      for (const auto& c : out["classes"]) {
        std::vector<std::string> fps = c["tables"].get<std::vector<std::string>>();
        std::cout << "  class " << c["class"].get<std::string>() << "  " << c["topology"].get<std::string>()
                  << "\n    tables: " << absl::StrJoin(fps, " ") << "\n";
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
    *exit_code = live_errors ? 1 : 0;
  });
}

}  // namespace hccltune::cli

// `hccl-tune show`: tuned tables, for people (default) or as JSON (the export format).
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_format.h"
#include "db/table_json.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {

void RegisterShow(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("show", "Show tuned tables");
  auto flags = std::make_shared<StoreFlags>();
  auto json = std::make_shared<bool>(false);
  auto topology = std::make_shared<std::string>();
  auto version = std::make_shared<int64_t>(0);
  AddStoreFlags(cmd, flags.get());
  cmd->add_flag("--json", *json, "Print JSON (the export format)");
  cmd->add_option("--topology", *topology, "Only this topology fingerprint");
  cmd->add_option("--version", *version, "With --topology: this table version (default latest)");
  cmd->callback([=] {
    auto opened = OpenStore(*flags);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    db::TuningStore& store = *opened->store;
    std::vector<db::Table> tables;
    std::vector<db::TableSummary> summaries;
    if (!topology->empty()) {
      auto t = store.GetTable(*topology, *version);
      if (!t.ok()) {
        *exit_code = ReportError(t.status());
        return;
      }
      tables.push_back(*std::move(t));
    } else {
      auto list = store.ListTables();
      if (!list.ok()) {
        *exit_code = ReportError(list.status());
        return;
      }
      summaries = *list;
      for (const db::TableSummary& s : summaries) {
        auto t = store.GetTable(s.topology.fingerprint, 0);
        if (!t.ok()) {
          *exit_code = ReportError(t.status());
          return;
        }
        tables.push_back(*std::move(t));
      }
    }
    if (*json) {
      std::cout << db::TablesToJson(tables);
      *exit_code = 0;
      return;
    }
    if (tables.empty()) std::cout << "no tuned tables in " << opened->where << "\n";
    for (const db::Table& t : tables) {
      std::cout << absl::StrFormat("topology %s  class %s  version %d  %d entries  hash %s\n  %s\n",
                                   t.topology.fingerprint,
                                   t.topology.topology_class.empty() ? "-" : t.topology.topology_class, t.version,
                                   t.entries.size(), t.content_hash.substr(0, 16), t.topology.json);
      std::cout << absl::StrFormat("  %-13s %-5s %6s %-12s %10s %9s %7s  %-12s %s\n", "coll", "dtype", "world", "bytes",
                                   "time_us", "busbw", "margin", "source", "configuration");
      for (const db::TunedEntry& e : t.entries) {
        std::cout << absl::StrFormat("  %-13s %-5s %6d %-12s %10.2f %9.2f %6.1f%%  %-12s %s\n",
                                     CollectiveName(e.key.collective), DataTypeName(e.key.dtype), e.key.world_size,
                                     FormatByteRange(e.key.range), e.time_us, e.busbw_gbps, 100 * e.margin,
                                     EntrySource(e), e.configuration);
      }
    }
    *exit_code = 0;
  });
}

}  // namespace hccltune::cli

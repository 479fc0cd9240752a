// `hccl-tune get`: the tuned configuration for one call, or (--class) the tables of one topology class.
#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "model/predict.h"
#include "model/profile.h"
#include "model/table_choice.h"
#include "nlohmann/json.hpp"
#include "runtime/common/fingerprint.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {
namespace {

// `get --class`: every table whose topology is of the class, one line each (or JSON); NotFound when none.
absl::Status ListClass(db::TuningStore& store, const std::string& where, const std::string& topology_class,
                       bool as_json) {
  auto tables = store.ListTablesOfClass(topology_class);
  if (!tables.ok()) return tables.status();
  if (tables->empty()) {
    return absl::NotFoundError(absl::StrCat("no tuned tables of topology class ", topology_class, " in ", where));
  }
  nlohmann::json out = {{"class", topology_class}, {"topology", ""}, {"tables", nlohmann::json::array()}};
  for (const db::TableSummary& t : *tables) {
    auto d = ParseTopologyJson(t.topology.json);
    if (d.ok()) out["topology"] = TopologyClassJson(*d);
    std::vector<int> rpn = d.ok() ? d->ranks_per_node : std::vector<int>();
    std::sort(rpn.begin(), rpn.end());
    out["tables"].push_back({{"fingerprint", t.topology.fingerprint},
                             {"topology", t.topology.json},
                             {"nodes", rpn.size()},
                             {"ranks_per_node", rpn},
                             {"latest_version", t.latest_version},
                             {"versions", t.versions},
                             {"entries", t.entries},
                             {"updated_unix_ms", t.updated_unix_ms}});
  }
  if (as_json) {
    std::cout << out.dump(2) << "\n";
    return absl::OkStatus();
  }
  std::cout << absl::StrFormat("class %s  %s\n", topology_class, out["topology"].get<std::string>());
  std::cout << absl::StrFormat("  %-16s %5s  %-16s %7s %7s  %s\n", "topology", "nodes", "ranks_per_node", "version",
                               "entries", "updated");
  for (const auto& t : out["tables"]) {
    std::cout << absl::StrFormat(
        "  %-16s %5d  %-16s %7d %7d  %s\n", t["fingerprint"].get<std::string>(), t["nodes"].get<int>(),
        absl::StrJoin(t["ranks_per_node"].get<std::vector<int>>(), ","), t["latest_version"].get<int64_t>(),
        t["entries"].get<uint64_t>(),
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(t["updated_unix_ms"].get<int64_t>()),
                         absl::UTCTimeZone()));
  }
  return absl::OkStatus();
}

// `get --explain`: every candidate's predicted time for the call, from the cost model of the topology's class (the
// version that predicted the entry, else the latest).
absl::Status Explain(db::TuningStore& store, const std::string& fp, int64_t version, const db::TunedEntry* entry,
                     Collective c, uint64_t bytes) {
  auto table = store.GetTable(fp, version);
  if (!table.ok()) return table.status();
  auto keys = CanonicalTopology(table->topology.json);
  if (!keys.ok()) return keys.status();
  auto shape = model::PredictableShape(keys->json);
  if (!shape.ok()) return shape.status();
  auto stored = store.GetModel(keys->topology_class, entry != nullptr ? entry->model_version : 0);
  if (!stored.ok()) return stored.status();
  auto profile = model::ParseProfile(stored->profile_json, absl::StrCat("model version ", stored->version));
  if (!profile.ok()) return profile.status();
  if (shape->nodes > 1 && !profile->inter_known) {
    return absl::FailedPreconditionError(absl::StrCat("model version ", stored->version, " of class ",
                                                      keys->topology_class, " never measured a network between nodes"));
  }
  std::cout << absl::StrFormat("predicted by model version %d of class %s (%s) for %s of %s on %dx%d:\n",
                               stored->version, keys->topology_class, profile->name, CollectiveName(c),
                               FormatBytes(bytes), shape->nodes, shape->ranks_per_node);
  const std::vector<model::Candidate> ranked = model::RankCandidates(*profile, c, *shape, bytes);
  for (const model::Candidate& k : ranked) {
    const bool chosen = entry != nullptr && k.config == entry->configuration;
    std::cout << absl::StrFormat("  %12.2f us  %s%s\n", k.seconds * 1e6, k.config, chosen ? "  <- the entry" : "");
  }
  if (ranked.empty()) return absl::OkStatus();
  const model::TableChoice t = model::ChooseForTable(*profile, c, *shape, bytes, ranked);
  std::cout << absl::StrFormat(
      "built-in default: %s (%s)\n", t.builtin.config,
      t.builtin.seconds > 0 ? absl::StrFormat("%.2f us", t.builtin.seconds * 1e6) : std::string("not priced"));
  std::cout << absl::StrFormat("a predicted table serves %s%s\n", t.chosen.config,
                               t.kept_default ? absl::StrFormat(": the built-in default, predicted at most %.0f%% "
                                                                "slower than the fastest",
                                                                model::kKeepDefaultMargin * 100)
                                              : "");
  return absl::OkStatus();
}

}  // namespace

void RegisterGet(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("get", "Look up the tuned configuration for one call");
  struct Args {
    StoreFlags store;
    std::string coll, dtype, bytes, topology, topology_class;
    int world = 0;
    int64_t version = 0;
    bool json = false;
    bool explain = false;
  };
  auto a = std::make_shared<Args>();
  AddStoreFlags(cmd, &a->store);
  const std::vector<CLI::Option*> lookup = {
      cmd->add_option("--coll", a->coll, "Collective, e.g. allreduce"),
      cmd->add_option("--dtype", a->dtype, "Data type, e.g. fp32"),
      cmd->add_option("--bytes", a->bytes, "Size in bytes (suffixes K, M, G)"),
      cmd->add_option("--world", a->world, "World size"),
      cmd->add_option("--topology", a->topology, "Topology fingerprint"),
      cmd->add_option("--version", a->version, "Table version (default latest)"),
  };
  auto* by_class = cmd->add_option("--class", a->topology_class,
                                   "List the tables of this topology class instead (16 hex digits, as show prints)");
  auto* json = cmd->add_flag("--json", a->json, "With --class: print JSON");
  auto* explain =
      cmd->add_flag("--explain", a->explain,
                    "Also print every candidate's time as the cost model of the topology's class predicts it");
  explain->excludes(by_class);
  for (CLI::Option* o : lookup) o->excludes(by_class);
  json->needs(by_class);
  cmd->callback([a, exit_code] {
    if (!a->topology_class.empty()) {
      auto opened = OpenStore(a->store);
      absl::Status s =
          opened.ok() ? ListClass(*opened->store, opened->where, a->topology_class, a->json) : opened.status();
      *exit_code = s.ok() ? 0 : ReportError(s);
      return;
    }
    if (a->coll.empty() || a->dtype.empty() || a->bytes.empty() || a->world == 0 || a->topology.empty()) {
      *exit_code = ReportError(absl::InvalidArgumentError(
          "get needs --coll, --dtype, --bytes, --world and --topology (or --class CLASS to list the tables of a "
          "topology class)"));
      return;
    }
    auto coll = ParseCollective(a->coll);
    auto dtype = ParseDataType(a->dtype);
    auto bytes = ParseBytes(a->bytes);
    for (const absl::Status& s : {coll.status(), dtype.status(), bytes.status()}) {
      if (!s.ok()) {
        *exit_code = ReportError(absl::InvalidArgumentError(s.message()));
        return;
      }
    }
    auto opened = OpenStore(a->store);
    if (!opened.ok()) {
      *exit_code = ReportError(opened.status());
      return;
    }
    auto e = opened->store->Lookup(a->topology, *coll, *dtype, a->world, *bytes, a->version);
    if (!e.ok()) {
      *exit_code = ReportError(e.status());
      return;
    }
    if (!e->has_value()) {
      *exit_code = ReportError(absl::NotFoundError(
          absl::StrFormat("no tuned entry for %s %s world %d at %s bytes in topology %s", CollectiveName(*coll),
                          DataTypeName(*dtype), a->world, FormatBytes(*bytes), a->topology)));
      return;
    }
    const db::TunedEntry& x = **e;
    std::cout << x.configuration << "\n";
    std::cerr << absl::StrFormat("range %s  time %.2f us  busbw %.2f GB/s  margin %.1f%%  runner-up %s  source %s\n",
                                 FormatByteRange(x.key.range), x.time_us, x.busbw_gbps, 100 * x.margin,
                                 x.runner_up.empty() ? "-" : x.runner_up, EntrySource(x));
    absl::Status s =
        a->explain ? Explain(*opened->store, a->topology, a->version, &x, *coll, *bytes) : absl::OkStatus();
    *exit_code = s.ok() ? 0 : ReportError(s);
  });
}

}  // namespace hccltune::cli

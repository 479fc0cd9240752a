// `hccl-tune simulate --nodes N --ranks-per-node R --profile FILE [--coll C] [--min-bytes B] [--max-bytes B]
// [--json] [--html FILE]`: the cost model's predicted time of every valid candidate per collective and size on a
// cluster that may not exist (model/simulate.h; docs/MODEL.md): the winner and runner-up per size and where the
// winner changes; --json gives every candidate; --html a chart per collective in the style of `report`.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/simulate.h"
#include "model/table_choice.h"
#include "nlohmann/json.hpp"
#include "runtime/common/sizes.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/svg_plot.h"

namespace hccltune::cli {
namespace {

constexpr int kMaxSimulatedRanks = 1 << 20;

struct SimulateArgs {
  int nodes = 0;
  int ranks_per_node = 0;
  std::string profile, coll, html;
  std::string min_bytes = "8", max_bytes = "64M";
  bool json = false;
};

std::string Micros(double seconds) { return absl::StrFormat("%.1f us", seconds * 1e6); }

nlohmann::json ToJson(const model::ClusterProfile& profile, const model::Shape& shape,
                      const std::vector<model::CollectivePrediction>& preds) {
  nlohmann::json out = {{"profile", profile.name},
                        {"nodes", shape.nodes},
                        {"ranks_per_node", shape.ranks_per_node},
                        {"collectives", nlohmann::json::array()}};
  for (const auto& p : preds) {
    nlohmann::json sizes = nlohmann::json::array();
    for (const auto& s : p.sizes) {
      nlohmann::json cands = nlohmann::json::array();
      for (const auto& c : s.ranked) cands.push_back({{"config", c.config}, {"time_us", c.seconds * 1e6}});
      nlohmann::json size = {{"bytes", s.bytes}, {"candidates", cands}};
      if (!s.ranked.empty()) {  // what a predicted table would serve (model/table_choice.h)
        const model::TableChoice t = model::ChooseForTable(profile, p.collective, shape, s.bytes, s.ranked);
        size["default"] = {{"config", t.builtin.config}, {"time_us", t.builtin.seconds * 1e6}};
        size["table"] = t.chosen.config;
      }
      sizes.push_back(size);
    }
    nlohmann::json ranges = nlohmann::json::array();
    for (const auto& w : model::Crossovers(p))
      ranges.push_back({{"algorithm", w.algorithm}, {"from", w.from}, {"to", w.to}});
    out["collectives"].push_back(
        {{"collective", std::string(CollectiveName(p.collective))}, {"sizes", sizes}, {"winners", ranges}});
  }
  return out;
}

void PrintText(const model::ClusterProfile& profile, const model::Shape& shape,
               const std::vector<model::CollectivePrediction>& preds) {
  std::printf("# %d nodes x %d ranks per node (%d ranks), profile %s: predicted by the cost model (docs/MODEL.md)\n",
              shape.nodes, shape.ranks_per_node, shape.ranks(), profile.name.c_str());
  for (const auto& p : preds) {
    std::printf("%s\n  %-8s %-52s %-12s %-52s %s\n", std::string(CollectiveName(p.collective)).c_str(), "bytes",
                "winner", "predicted", "runner-up", "predicted");
    for (const auto& s : p.sizes) {
      if (s.ranked.empty()) continue;
      const auto& w = s.ranked[0];
      const std::string second = s.ranked.size() > 1 ? model::PricedName(s.ranked[1].config) : "-";
      const std::string second_t = s.ranked.size() > 1 ? Micros(s.ranked[1].seconds) : "";
      std::printf("  %-8s %-52s %-12s %-52s %s\n", FormatBytes(s.bytes).c_str(), model::PricedName(w.config).c_str(),
                  Micros(w.seconds).c_str(), second.c_str(), second_t.c_str());
    }
    std::string line;
    for (const auto& w : model::Crossovers(p)) {
      absl::StrAppend(&line, line.empty() ? "" : ", ", w.algorithm, " ", FormatBytes(w.from), "-", FormatBytes(w.to));
    }
    std::printf("  winners: %s\n", line.empty() ? "none valid" : line.c_str());
  }
}

absl::Status WriteHtml(const std::string& path, const model::ClusterProfile& profile, const model::Shape& shape,
                       const std::vector<model::CollectivePrediction>& preds) {
  std::string html =
      absl::StrCat("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>hccl-tune simulate ",
                   HtmlEscape(profile.name), "</title></head><body>\n<h1>Predicted: ", shape.nodes, " nodes x ",
                   shape.ranks_per_node, " ranks, profile ", HtmlEscape(profile.name),
                   "</h1>\n<p>Busbw of every valid algorithm (its default configuration) as the cost model "
                   "predicts it; bands mark the predicted winner.</p>\n");
  for (const auto& p : preds) {
    std::map<std::string, Curve> curves;
    for (const auto& s : p.sizes) {
      for (const auto& c : s.ranked) {
        const double busbw = static_cast<double>(s.bytes) * BusBandwidthFactor(p.collective, shape.ranks()) /
                             std::max(c.seconds, 1e-12) / 1e9;
        curves[model::AlgorithmOf(c.config)].best[s.bytes] = {busbw, c.config};
      }
    }
    std::vector<db::TunedEntry> bands;
    for (const auto& w : model::Crossovers(p)) {
      db::TunedEntry e;
      e.key.range = {w.from, w.to + 1};
      e.configuration = w.algorithm;
      bands.push_back(e);
    }
    html += Plot(std::string(CollectiveName(p.collective)), curves, bands);
  }
  html += "</body></html>\n";
  std::ofstream f(path);
  f << html;
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::Status Run(const SimulateArgs& a) {
  if (a.nodes < 1 || a.ranks_per_node < 1 || static_cast<int64_t>(a.nodes) * a.ranks_per_node > kMaxSimulatedRanks) {
    return absl::InvalidArgumentError(absl::StrCat("need --nodes >= 1 and --ranks-per-node >= 1, at most ",
                                                   kMaxSimulatedRanks, " ranks (got ", a.nodes, " x ", a.ranks_per_node,
                                                   ")"));
  }
  auto lo = ParseBytes(a.min_bytes);
  if (!lo.ok()) return absl::InvalidArgumentError(absl::StrCat("--min-bytes: ", lo.status().message()));
  auto hi = ParseBytes(a.max_bytes);
  if (!hi.ok()) return absl::InvalidArgumentError(absl::StrCat("--max-bytes: ", hi.status().message()));
  if (*lo < 1 || *hi < *lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("need 1 <= --min-bytes <= --max-bytes (got ", a.min_bytes, ", ", a.max_bytes, ")"));
  }
  std::vector<Collective> colls;
  if (!a.coll.empty()) {
    auto c = ParseCollective(a.coll);
    if (!c.ok()) return c.status();
    colls.push_back(*c);
  } else {
    for (Collective c : AllCollectives()) {
      if (c != Collective::kSendRecv) colls.push_back(c);
    }
  }
  auto profile = model::ReadProfileFile(a.profile);
  if (!profile.ok()) return profile.status();
  const model::Shape shape{a.nodes, a.ranks_per_node};
  if (shape.nodes > 1 && !profile->inter_known) {
    return absl::FailedPreconditionError(absl::StrCat("profile ", profile->name,
                                                      " never measured a network between nodes: simulate one node "
                                                      "(--nodes 1) or fit it to sweeps on several nodes"));
  }
  const auto preds = model::Simulate(*profile, shape, colls, *lo, *hi);
  if (!a.html.empty()) {
    if (auto s = WriteHtml(a.html, *profile, shape, preds); !s.ok()) return s;
  }
  if (a.json) {
    std::cout << ToJson(*profile, shape, preds).dump(2) << "\n";
  } else {
    PrintText(*profile, shape, preds);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterSimulate(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand("simulate", "Predict every candidate's time on a cluster shape from a profile");
  cmd->add_option("--nodes", a->nodes, "Nodes")->required();
  cmd->add_option("--ranks-per-node", a->ranks_per_node, "Ranks on each node")->required();
  cmd->add_option("--profile", a->profile, "Cluster profile (JSON; docs/MODEL.md)")->required();
  cmd->add_option("--coll", a->coll, "Only this collective");
  cmd->add_option("--min-bytes", a->min_bytes, "Smallest size")->capture_default_str();
  cmd->add_option("--max-bytes", a->max_bytes, "Largest size (sizes double from the smallest)")->capture_default_str();
  cmd->add_flag("--json", a->json, "Every candidate's predicted time as JSON");
  cmd->add_option("--html", a->html, "Also write a chart of the predicted busbw and winners to this file");
  cmd->callback([a, exit_code] {
    const absl::Status s = Run(*a);
    if (!s.ok()) std::fprintf(stderr, "hccl-tune simulate: %s\n", std::string(s.message()).c_str());
    *exit_code = s.ok() ? 0 : 2;
  });
}

}  // namespace hccltune::cli

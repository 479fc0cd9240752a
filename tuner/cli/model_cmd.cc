// `hccl-tune model fit | check | show`: the cost model's profile fitted to the sweeps of a store, checked against
// them, and shown (model/fit.h, model/check.h; docs/MODEL.md).
//   fit   (--db F | --daemon T) [--sweep ID]... --out PROFILE [--name N] [--nics-per-node K] [--cores-per-node C]
//   check (--db F | --daemon T) [--sweep ID]... --profile PROFILE [--json]
//   show  --profile PROFILE
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/check.h"
#include "model/fit.h"
#include "nlohmann/json.hpp"
#include "runtime/common/sizes.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {
namespace {

struct ModelArgs {
  StoreFlags store;
  std::vector<std::string> sweeps;
  std::string out, profile, name = "fitted";
  int nics = 1;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  bool json = false;
};

// The shape a sweep ran on, from its row's topology JSON; NotFound when it cannot tell or the nodes are uneven.
absl::StatusOr<model::Shape> SweepShape(const db::Sweep& row) {
  const auto params = nlohmann::json::parse(row.params_json, nullptr, false);
  if (!params.is_object() || !params.contains("topology") || !params["topology"].is_string()) {
    return absl::NotFoundError(absl::StrCat("sweep ", row.id, " recorded no topology"));
  }
  const auto topo = nlohmann::json::parse(params["topology"].get<std::string>(), nullptr, false);
  if (!topo.is_object() || !topo.contains("ranks_per_node") || !topo["ranks_per_node"].is_array() ||
      topo["ranks_per_node"].empty()) {
    return absl::NotFoundError(absl::StrCat("sweep ", row.id, ": topology without ranks per node"));
  }
  const auto& rpn = topo["ranks_per_node"];
  for (const auto& k : rpn) {
    if (!k.is_number_integer() || k != rpn[0]) {
      return absl::NotFoundError(absl::StrCat("sweep ", row.id, ": uneven nodes ", rpn.dump()));
    }
  }
  return model::Shape{static_cast<int>(rpn.size()), rpn[0].get<int>()};
}

// Every sample of the named sweeps (all when none named), with its sweep's shape.
absl::StatusOr<std::vector<model::Measurement>> ReadMeasurements(const ModelArgs& a, size_t* used_sweeps) {
  auto opened = OpenStore(a.store);
  if (!opened.ok()) return opened.status();
  db::TuningStore& store = *opened->store;
  std::vector<db::Sweep> rows;
  if (a.sweeps.empty()) {
    auto all = store.ListSweeps();
    if (!all.ok()) return all.status();
    rows = *std::move(all);
  } else {
    for (const std::string& id : a.sweeps) {
      auto row = store.GetSweep(id);
      if (!row.ok()) return row.status();
      rows.push_back(*std::move(row));
    }
  }
  std::vector<model::Measurement> out;
  *used_sweeps = 0;
  for (const db::Sweep& row : rows) {
    auto shape = SweepShape(row);
    if (!shape.ok()) {
      std::fprintf(stderr, "hccl-tune model: %s: left out\n", std::string(shape.status().message()).c_str());
      continue;
    }
    auto samples = store.GetSweepSamples(row.id);
    if (!samples.ok()) return samples.status();
    ++*used_sweeps;
    for (const db::SweepSample& s : *samples) {
      out.push_back({s.collective, s.configuration, *shape, s.bytes, s.time_us * 1e-6});
    }
  }
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no sweep samples in ", opened->where, a.sweeps.empty() ? "" : " for the named sweeps"));
  }
  return out;
}

void PrintProfile(const model::ClusterProfile& p) {
  const auto link = [](const char* what, const model::LinkCost& l) {
    std::printf("  %-6s latency %.2f us/round, overhead %.2f us/message, %.3f GB/s\n", what, l.alpha_s * 1e6,
                l.overhead_s * 1e6, 1e-9 / l.beta_s);
  };
  std::printf("profile %s\n", p.name.c_str());
  link("intra", p.intra);
  if (p.inter_known) {
    link("inter", p.inter);
  } else {
    std::printf("  inter  never measured: no prediction across nodes\n");
  }
  std::printf("  reduce %.3f GB/s; %d NIC(s) per node; cores per node %d\n", 1e-9 / p.gamma_s, p.nics_per_node,
              p.cores_per_node);
}

absl::Status RunFit(const ModelArgs& a) {
  if (a.nics < 1 || a.cores < 0) return absl::InvalidArgumentError("need --nics-per-node >= 1, --cores-per-node >= 0");
  size_t sweeps = 0;
  auto ms = ReadMeasurements(a, &sweeps);
  if (!ms.ok()) return ms.status();
  auto fit = model::Fit(*ms, {a.name, a.nics, a.cores});
  if (!fit.ok()) return fit.status();
  std::ofstream f(a.out);
  f << model::ProfileToJson(fit->profile) << "\n";
  if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", a.out));
  std::printf("fitted %zu one-node and %zu multi-node points from %zu sweeps (%zu samples unusable) -> %s\n",
              fit->intra_points, fit->inter_points, sweeps, fit->skipped, a.out.c_str());
  PrintProfile(fit->profile);
  return absl::OkStatus();
}

nlohmann::json CheckJson(const model::CheckReport& r) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : r.buckets) {
    buckets.push_back({{"collective", std::string(CollectiveName(b.collective))},
                       {"nodes", b.shape.nodes},
                       {"ranks_per_node", b.shape.ranks_per_node},
                       {"bytes", b.bytes},
                       {"candidates", b.candidates},
                       {"median_error", b.median_error},
                       {"predicted_winner", b.predicted_winner},
                       {"measured_winner", b.measured_winner},
                       {"winner_gap", b.winner_gap}});
  }
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [c, s] : r.summary) {
    summary[std::string(CollectiveName(c))] = {{"buckets", s.buckets},
                                               {"median_error", s.median_error},
                                               {"within_15", s.within_15},
                                               {"winner_ok", s.winner_ok}};
  }
  return {{"buckets", buckets}, {"summary", summary}, {"skipped", r.skipped}};
}

void PrintCheck(const model::CheckReport& r) {
  std::printf("%-13s %-6s %-8s %5s %8s  %s\n", "collective", "shape", "bytes", "cands", "error", "winner");
  for (const auto& b : r.buckets) {
    std::printf("%-13s %-6s %-8s %5zu %7.1f%%  %s%s\n", std::string(CollectiveName(b.collective)).c_str(),
                absl::StrCat(b.shape.nodes, "x", b.shape.ranks_per_node).c_str(), FormatBytes(b.bytes).c_str(),
                b.candidates, b.median_error * 100,
                b.winner_ok() ? "ok" : absl::StrFormat("%.0f%% slower: ", b.winner_gap * 100).c_str(),
                b.winner_ok() ? "" : (b.predicted_winner + " vs " + b.measured_winner).c_str());
  }
  std::printf("\n%-13s %7s %13s %16s %18s\n", "collective", "buckets", "median error", "error <= 15%",
              "winner within 5%");
  for (const auto& [c, s] : r.summary) {
    std::printf("%-13s %7zu %12.1f%% %9zu (%3.0f%%) %11zu (%3.0f%%)\n", std::string(CollectiveName(c)).c_str(),
                s.buckets, s.median_error * 100, s.within_15, 100.0 * s.within_15 / s.buckets, s.winner_ok,
                100.0 * s.winner_ok / s.buckets);
  }
  if (r.skipped > 0) std::printf("(%zu measurements the profile cannot predict left out)\n", r.skipped);
}

absl::Status RunCheck(const ModelArgs& a) {
  auto profile = model::ReadProfileFile(a.profile);
  if (!profile.ok()) return profile.status();
  size_t sweeps = 0;
  auto ms = ReadMeasurements(a, &sweeps);
  if (!ms.ok()) return ms.status();
  const model::CheckReport r = model::Check(*profile, *ms);
  if (r.buckets.empty()) return absl::NotFoundError("no measurement the profile can predict");
  if (a.json) {
    std::cout << CheckJson(r).dump(2) << "\n";
  } else {
    PrintCheck(r);
  }
  return absl::OkStatus();
}

void Finish(const absl::Status& s, int* exit_code) { *exit_code = s.ok() ? 0 : ReportError(s); }

}  // namespace

void RegisterModel(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<ModelArgs>();
  auto* cmd = app.add_subcommand("model", "Fit, check and show the cost model's cluster profile");
  cmd->require_subcommand(1);
  auto* fit = cmd->add_subcommand("fit", "Fit a profile to the sweeps of a store");
  AddStoreFlags(fit, &a->store);
  fit->add_option("--sweep", a->sweeps, "Only these sweeps (repeatable; default: every sweep)");
  fit->add_option("--out", a->out, "Write the fitted profile (JSON) here")->required();
  fit->add_option("--name", a->name, "The profile's name")->capture_default_str();
  fit->add_option("--nics-per-node", a->nics, "NICs a node's ranks shared in the sweeps")->capture_default_str();
  fit->add_option("--cores-per-node", a->cores, "Cores the ranks of a node shared in the sweeps (0: not counted)")
      ->capture_default_str();
  fit->callback([a, exit_code] { Finish(RunFit(*a), exit_code); });
  auto* check = cmd->add_subcommand("check", "Predicted against every stored measurement, per bucket");
  AddStoreFlags(check, &a->store);
  check->add_option("--sweep", a->sweeps, "Only these sweeps (repeatable; default: every sweep)");
  check->add_option("--profile", a->profile, "The profile to check")->required();
  check->add_flag("--json", a->json, "Every bucket and the summary as JSON");
  check->callback([a, exit_code] { Finish(RunCheck(*a), exit_code); });
  auto* show = cmd->add_subcommand("show", "A profile's parameters in plain units");
  show->add_option("--profile", a->profile, "The profile")->required();
  show->callback([a, exit_code] {
    auto p = model::ReadProfileFile(a->profile);
    if (p.ok()) PrintProfile(*p);
    Finish(p.status(), exit_code);
  });
}

}  // namespace hccltune::cli

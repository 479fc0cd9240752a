// `hccl-tune model fit | check | show`: the cost model's profile fitted to the sweeps of a store, checked against
// them, and shown (model/fit.h, model/check.h; docs/MODEL.md).
//   fit   (--db F | --daemon T) [--sweep ID]... (--out PROFILE | --store) [--name N] [--nics-per-node K]
//         [--cores-per-node C [--cores-shared]] [--single-copy-bytes B]
//   check (--db F | --daemon T) [--sweep ID]... (--profile PROFILE | --class C [--model-version V]) [--json]
//   show  --profile PROFILE | (--db F | --daemon T) [--class C [--model-version V]]
// --store keeps the fitted profile in the store as the next model version of each topology class the sweeps ran
// on: hccl-tuned predicts the tables of that class's unmeasured topologies from it (docs/MODEL.md).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "db/store_util.h"
#include "model/check.h"
#include "model/fit.h"
#include "nlohmann/json.hpp"
#include "runtime/common/fingerprint.h"
#include "runtime/common/sizes.h"
#include "tuner/bench/call.h"
#include "tuner/cli/commands.h"
#include "tuner/cli/store_access.h"

namespace hccltune::cli {
namespace {

struct ModelArgs {
  StoreFlags store;
  std::vector<std::string> sweeps;
  std::string out, profile, name = "fitted";
  bool store_model = false;
  std::string topology_class;
  int64_t model_version = 0;
  int nics = 1;
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  bool cores_shared = false;
  int64_t single_copy = -1;
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

// The topology class of a sweep's row ("" when its topology cannot be read).
std::string SweepClass(const db::Sweep& row) {
  const auto params = nlohmann::json::parse(row.params_json, nullptr, false);
  if (!params.is_object() || !params.contains("topology") || !params["topology"].is_string()) return "";
  auto keys = CanonicalTopology(params["topology"].get<std::string>());
  return keys.ok() ? keys->topology_class : "";
}

// Every sample of the named sweeps (all when none named) in `store`, with its sweep's shape; the topology classes
// and ids of the sweeps used into `classes` and `ids`.
absl::StatusOr<std::vector<model::Measurement>> ReadMeasurements(const ModelArgs& a, db::TuningStore& store,
                                                                 const std::string& where,
                                                                 std::set<std::string>* classes,
                                                                 std::vector<std::string>* ids) {
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
  size_t empty = 0;
  for (const db::Sweep& row : rows) {
    auto shape = SweepShape(row);
    if (!shape.ok()) {
      std::fprintf(stderr, "hccl-tune model: %s: left out\n", std::string(shape.status().message()).c_str());
      continue;
    }
    auto samples = store.GetSweepSamples(row.id);
    if (!samples.ok()) return samples.status();
    ids->push_back(row.id);
    if (std::string c = SweepClass(row); !c.empty()) classes->insert(c);
    for (const db::SweepSample& s : *samples) {
      // A size too small for one element per rank's block (allgather of 8 bytes fp32 on 4 ranks) was a call of no
      // elements: it measured the runtime's early return, not the collective the model predicts.
      if (bench::CountFor(s.collective, s.bytes, s.dtype, shape->ranks()) == 0) {
        ++empty;
        continue;
      }
      out.push_back({s.collective, s.configuration, *shape, s.bytes, s.time_us * 1e-6});
    }
  }
  if (empty > 0) std::fprintf(stderr, "hccl-tune model: %zu samples of calls with no elements left out\n", empty);
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no sweep samples in ", where, a.sweeps.empty() ? "" : " for the named sweeps"));
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
  std::printf("  reduce %.3f GB/s; %d NIC(s) per node; cores per node %d%s\n", 1e-9 / p.gamma_s, p.nics_per_node,
              p.cores_per_node, p.cores_shared ? ", shared by every node" : "");
  if (p.version < 2) return;
  if (p.intra_tcp_known) {
    link("tcp", p.intra_tcp);
  } else {
    std::printf("  tcp    never measured inside a node: no prediction for link=tcp on one node\n");
  }
  std::printf("  call %.2f us; mailbox %.2f us/exchange; oversubscribed %.2f us/call, %.2f us/round, %.4f ns/byte\n",
              p.call_s * 1e6, p.mailbox_s * 1e6, p.oversubscribed.call_s * 1e6, p.oversubscribed.round_s * 1e6,
              p.oversubscribed.byte_s * 1e9);
  if (p.single_copy_bytes > 0) {
    std::printf("  single copy over shm from %llu-byte messages (twice that when oversubscribed)\n",
                static_cast<unsigned long long>(p.single_copy_bytes));
  } else {
    std::printf("  single copy over shm: none seen\n");
  }
  if (p.inter_known) {
    const model::Oversubscribed& o = p.inter_oversubscribed;
    std::printf("  across nodes, oversubscribed %.2f us/call, %.2f us/round, %.4f ns/byte\n", o.call_s * 1e6,
                o.round_s * 1e6, o.byte_s * 1e9);
  }
}

// Stores `profile` as the next model version of every class in `classes`.
absl::Status StoreModel(db::TuningStore& store, const model::ClusterProfile& profile,
                        const std::set<std::string>& classes, const std::vector<std::string>& ids) {
  if (classes.empty()) return absl::NotFoundError("the sweeps used recorded no readable topology: nothing to store");
  std::string source = absl::StrCat("fit of ", ids.size(), " sweeps: ", absl::StrJoin(ids, " "));
  if (source.size() > db::kMaxTextBytes) source = source.substr(0, db::kMaxTextBytes - 3) + "...";
  for (const std::string& c : classes) {
    auto v = store.PutModel(db::StoredModel{c, 0, model::ProfileToJson(profile), source, db::NowUnixMs(), 0});
    if (!v.ok()) return v.status();
    std::printf("stored as model version %lld of topology class %s\n", static_cast<long long>(*v), c.c_str());
  }
  return absl::OkStatus();
}

absl::Status RunFit(const ModelArgs& a) {
  if (a.nics < 1 || a.cores < 0) return absl::InvalidArgumentError("need --nics-per-node >= 1, --cores-per-node >= 0");
  if (a.out.empty() && !a.store_model) return absl::InvalidArgumentError("model fit needs --out PROFILE or --store");
  auto opened = OpenStore(a.store);
  if (!opened.ok()) return opened.status();
  std::set<std::string> classes;
  std::vector<std::string> ids;
  auto ms = ReadMeasurements(a, *opened->store, opened->where, &classes, &ids);
  if (!ms.ok()) return ms.status();
  auto fit = model::Fit(*ms, {a.name, a.nics, a.cores, a.cores_shared, a.single_copy});
  if (!fit.ok()) return fit.status();
  std::printf(
      "fitted %zu one-node and %zu multi-node points from %zu sweeps (%zu samples unusable; %zu one-node "
      "points over tcp)\n",
      fit->intra_points + fit->tcp_points, fit->inter_points, ids.size(), fit->skipped, fit->tcp_points);
  PrintProfile(fit->profile);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << model::ProfileToJson(fit->profile) << "\n";
    if (!f) return absl::UnavailableError(absl::StrCat("cannot write ", a.out));
    std::printf("written to %s\n", a.out.c_str());
  }
  return a.store_model ? StoreModel(*opened->store, fit->profile, classes, ids) : absl::OkStatus();
}

// The profile to check or show: --profile FILE, else the stored model of --class (version --model-version).
absl::StatusOr<model::ClusterProfile> LoadProfile(const ModelArgs& a, db::TuningStore* store) {
  if (!a.profile.empty()) return model::ReadProfileFile(a.profile);
  if (a.topology_class.empty()) return absl::InvalidArgumentError("need --profile FILE or --class CLASS");
  if (store == nullptr) return absl::InvalidArgumentError("--class needs a store (--db or --daemon)");
  auto m = store->GetModel(a.topology_class, a.model_version);
  if (!m.ok()) return m.status();
  return model::ParseProfile(m->profile_json, absl::StrCat("model version ", m->version, " of ", a.topology_class));
}

// `model show` without --profile: the stored models (the latest of each class, or one class's).
absl::Status ShowStored(const ModelArgs& a) {
  auto opened = OpenStore(a.store);
  if (!opened.ok()) return opened.status();
  std::vector<db::StoredModel> models;
  if (!a.topology_class.empty()) {
    auto m = opened->store->GetModel(a.topology_class, a.model_version);
    if (!m.ok()) return m.status();
    models.push_back(*std::move(m));
  } else {
    auto all = opened->store->ListModels();
    if (!all.ok()) return all.status();
    models = *std::move(all);
  }
  if (models.empty()) std::printf("no cost models in %s\n", opened->where.c_str());
  for (const db::StoredModel& m : models) {
    auto p = model::ParseProfile(m.profile_json, absl::StrCat("model version ", m.version));
    std::printf(
        "class %s  model version %lld  fitted %s  (%s)\n", m.topology_class.c_str(), static_cast<long long>(m.version),
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(m.fitted_unix_ms), absl::UTCTimeZone()).c_str(),
        m.source.c_str());
    if (!p.ok()) return p.status();
    PrintProfile(*p);
  }
  return absl::OkStatus();
}

nlohmann::json CheckJson(const model::CheckReport& r) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& b : r.buckets) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : b.points) {
      points.push_back(
          {{"config", p.config}, {"measured_us", p.measured_s * 1e6}, {"predicted_us", p.predicted_s * 1e6}});
    }
    buckets.push_back({{"collective", std::string(CollectiveName(b.collective))},
                       {"nodes", b.shape.nodes},
                       {"ranks_per_node", b.shape.ranks_per_node},
                       {"bytes", b.bytes},
                       {"candidates", b.candidates},
                       {"median_error", b.median_error},
                       {"predicted_winner", b.predicted_winner},
                       {"measured_winner", b.measured_winner},
                       {"winner_gap", b.winner_gap},
                       {"points", points}});
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
  auto opened = OpenStore(a.store);
  if (!opened.ok()) return opened.status();
  auto profile = LoadProfile(a, opened->store.get());
  if (!profile.ok()) return profile.status();
  std::set<std::string> classes;
  std::vector<std::string> ids;
  auto ms = ReadMeasurements(a, *opened->store, opened->where, &classes, &ids);
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
  fit->add_option("--out", a->out, "Write the fitted profile (JSON) here");
  fit->add_flag("--store", a->store_model,
                "Store the profile as the next model version of each topology class the sweeps ran on");
  fit->add_option("--name", a->name, "The profile's name")->capture_default_str();
  fit->add_option("--nics-per-node", a->nics, "NICs a node's ranks shared in the sweeps")->capture_default_str();
  fit->add_option("--cores-per-node", a->cores, "Cores the ranks of a node shared in the sweeps (0: not counted)")
      ->capture_default_str();
  fit->add_flag("--cores-shared", a->cores_shared,
                "The sweeps' nodes shared those cores (an emulated cluster on one host): the wait for a core counts "
                "every node's ranks");
  fit->add_option("--single-copy-bytes", a->single_copy,
                  "The smallest shm message the sweeps' ranks read by single copy, a core per rank (the runtime's "
                  "log says it; 0: none); default: the measured size that fits best")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  fit->callback([a, exit_code] { Finish(RunFit(*a), exit_code); });
  auto* check = cmd->add_subcommand("check", "Predicted against every stored measurement, per bucket");
  AddStoreFlags(check, &a->store);
  check->add_option("--sweep", a->sweeps, "Only these sweeps (repeatable; default: every sweep)");
  auto* check_profile = check->add_option("--profile", a->profile, "The profile to check");
  auto* check_class = check->add_option("--class", a->topology_class, "Check this class's stored model instead");
  check_profile->excludes(check_class);
  check->add_option("--model-version", a->model_version, "With --class: this version (default latest)");
  check->add_flag("--json", a->json, "Every bucket and the summary as JSON");
  check->callback([a, exit_code] { Finish(RunCheck(*a), exit_code); });
  auto* show = cmd->add_subcommand("show", "A profile's parameters in plain units, or the stored models");
  auto* show_profile = show->add_option("--profile", a->profile, "A profile file");
  AddStoreFlags(show, &a->store);
  auto* show_class = show->add_option("--class", a->topology_class, "Only this class's stored model");
  show->add_option("--model-version", a->model_version, "With --class: this version (default latest)");
  show_profile->excludes(show_class);
  show->callback([a, exit_code] {
    if (a->profile.empty()) return Finish(ShowStored(*a), exit_code);
    auto p = model::ReadProfileFile(a->profile);
    if (p.ok()) PrintProfile(*p);
    Finish(p.status(), exit_code);
  });
}

}  // namespace hccltune::cli

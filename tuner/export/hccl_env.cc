#include "tuner/export/hccl_env.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/sweep/search.h"

namespace hccltune::exporter {
namespace {

using PointKey = std::tuple<Collective, DataType, uint64_t>;

// What HCCL_ALGO can say for a configuration: a group label (configurations of one label are one HCCL choice)
// and the levels written for it; nullopt when HCCL_ALGO cannot name it.
struct Expressible {
  std::string label;
  std::string levels;
  bool nameable = true;  // false: a hierarchical form HCCL_ALGO cannot name, totalled only to be printed
};

absl::string_view HcclName(absl::string_view ours) {
  if (ours == "ring") return "ring";
  if (ours == "halving_doubling") return "H-D_R";
  return "";
}

// The nodes' shape, as far as HCCL_ALGO's choices depend on it.
struct Nodes {
  bool several = false;
  bool even = true;  // every node has as many ranks (form=auto runs the parallel form)
};

// The form hierarchical(form=auto) runs on these nodes (runtime/algorithms/hierarchy.h LeaderForm).
HierForm AutoForm(const Nodes& n) { return n.even ? HierForm::kParallel : HierForm::kLeader; }

std::optional<Expressible> ExpressibleAs(const std::string& config, const Nodes& nodes) {
  auto c = Configuration::Parse(config);
  if (!c.ok()) return std::nullopt;
  if (!nodes.several) {
    const absl::string_view h = HcclName(c->algorithm);
    if (h.empty()) return std::nullopt;
    return Expressible{c->algorithm, absl::StrCat("level0:", h, ";level1:NA")};
  }
  if (c->algorithm == "hierarchical" && c->inter != nullptr) {
    // level1:X = hierarchical(inter=X) with the usual step inside the nodes and form=auto: HCCL_ALGO has no word
    // for the form, so only the configurations that run the form auto runs here are what level1:X does.
    const absl::string_view h = HcclName(c->inter->algorithm);
    if (h.empty()) return std::nullopt;
    if (c->form != HierForm::kAuto && c->form != AutoForm(nodes)) {
      return Expressible{absl::StrCat("hierarchical(inter=", c->inter->algorithm, ",form=", HierFormName(c->form), ")"),
                         "", false};
    }
    return Expressible{absl::StrCat("hierarchical(inter=", c->inter->algorithm, ")"),
                       absl::StrCat("level0:NA;level1:", h)};
  }
  const absl::string_view h = HcclName(c->algorithm);
  if (h.empty()) return std::nullopt;
  return Expressible{c->algorithm, absl::StrCat("level0:NA;level1:", h)};
}

std::string RuntimeOf(const db::Topology& t) {
  auto d = ParseTopologyJson(t.json);
  if (!d.ok()) return "?";
  const std::string peer = PeerRuntimeName(d->runtime);
  return peer.empty() ? std::string(kOwnRuntime) : peer;
}

// Per point, per configuration: the median of the kept samples of the sweeps that wrote the table's entries.
absl::StatusOr<std::map<PointKey, std::map<std::string, double>>> Medians(db::TuningStore& store,
                                                                          const db::Table& table, int world) {
  std::set<std::string> sweeps;
  for (const db::TunedEntry& e : table.entries) {
    if (e.key.world_size == world && !e.sweep_id.empty()) sweeps.insert(e.sweep_id);
  }
  std::map<PointKey, std::map<std::string, std::vector<double>>> samples;
  std::vector<std::string> gone;
  for (const std::string& id : sweeps) {
    auto s = store.GetSweepSamples(id);
    if (!s.ok() && !absl::IsNotFound(s.status())) return s.status();
    if (!s.ok() || s->empty()) {
      gone.push_back(id);
      continue;
    }
    for (const db::SweepSample& x : *s) {
      if (x.world_size == world) samples[{x.collective, x.dtype, x.bytes}][x.configuration].push_back(x.time_us);
    }
  }
  if (samples.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the samples of the sweeps behind table ", table.topology.fingerprint, " at world ", world,
                     " are no longer kept (", gone.empty() ? std::string("no sweep named") : absl::StrJoin(gone, ", "),
                     "): HCCL_ALGO needs every algorithm's time per size; run hccl-tune sweep again"));
  }
  std::map<PointKey, std::map<std::string, double>> out;
  for (auto& [point, by_config] : samples) {
    for (auto& [config, times] : by_config) out[point][config] = sweep::MedianWithCI(times).median;
  }
  return out;
}

// Live calls per point: each power-of-two bucket counted at the measured size that covers it (the largest
// measured size at or below the bucket, else the smallest).
std::map<PointKey, uint64_t> LiveWeights(db::TuningStore& store, const std::string& fingerprint, int world,
                                         const std::map<PointKey, std::map<std::string, double>>& points) {
  std::map<PointKey, uint64_t> out;
  auto stats = store.GetLiveStats(fingerprint);
  if (!stats.ok()) return out;
  for (const db::LiveStats& s : *stats) {
    if (s.world_size != world) continue;
    const PointKey* cover = nullptr;
    for (const auto& [p, unused] : points) {
      if (std::get<0>(p) != s.collective || std::get<1>(p) != s.dtype) continue;
      if (cover == nullptr || std::get<2>(p) <= s.bucket.min) cover = &p;
    }
    if (cover != nullptr) out[*cover] += s.count;
  }
  return out;
}

HcclEnvChoice Choose(Collective c, const std::map<PointKey, std::map<std::string, double>>& points,
                     const std::map<PointKey, uint64_t>& live, const Nodes& nodes) {
  HcclEnvChoice ch;
  ch.collective = c;
  uint64_t live_calls = 0;
  for (const auto& [p, n] : live) {
    if (std::get<0>(p) == c) live_calls += n;
  }
  ch.live_calls = live_calls;
  // Several nodes: when hierarchical was measured, level1:X means hierarchical(inter=X), so whole-collective
  // configurations are not what HCCL_ALGO would run.
  bool has_hierarchical = false;
  for (const auto& [p, by_config] : points) {
    if (std::get<0>(p) != c) continue;
    for (const auto& [config, unused] : by_config) {
      has_hierarchical = has_hierarchical || absl::StartsWith(config, "hierarchical(");
    }
  }
  std::map<std::string, AlgorithmTotal> totals;
  std::map<std::string, std::string> levels;
  std::set<std::string> unnameable;
  std::vector<std::map<std::string, double>> per_point;
  std::vector<double> weights;
  for (const auto& [p, by_config] : points) {
    if (std::get<0>(p) != c) continue;
    const double w = live_calls > 0 ? static_cast<double>(live.count(p) ? live.at(p) : 0) : 1.0;
    std::map<std::string, double> best;
    double winner = 0;
    for (const auto& [config, median] : by_config) {
      winner = winner == 0 ? median : std::min(winner, median);
      auto e = ExpressibleAs(config, nodes);
      if (!e || (nodes.several && has_hierarchical && !absl::StartsWith(e->label, "hierarchical("))) continue;
      levels[e->label] = e->levels;
      if (!e->nameable) unnameable.insert(e->label);
      auto it = best.find(e->label);
      if (it == best.end() || median < it->second) best[e->label] = median;
    }
    ch.winners_us += w * winner;
    per_point.push_back(std::move(best));
    weights.push_back(w);
    ++ch.sizes;
  }
  for (const auto& [label, unused] : levels) {
    AlgorithmTotal t{label, 0, 0, unnameable.count(label) == 0};
    for (size_t i = 0; i < per_point.size(); ++i) {
      auto it = per_point[i].find(label);
      if (it == per_point[i].end()) {
        ++t.missing;
      } else {
        t.total_us += weights[i] * it->second;
      }
    }
    ch.totals.push_back(t);
  }
  std::sort(ch.totals.begin(), ch.totals.end(), [](const AlgorithmTotal& a, const AlgorithmTotal& b) {
    if ((a.nameable && a.missing == 0) != (b.nameable && b.missing == 0)) return a.nameable && a.missing == 0;
    return a.total_us != b.total_us ? a.total_us < b.total_us : a.algorithm < b.algorithm;
  });
  if (!ch.totals.empty() && ch.totals.front().missing == 0 && ch.totals.front().nameable) {
    ch.algorithm = ch.totals.front().algorithm;
    ch.hccl_level = levels[ch.algorithm];
  } else {
    ch.hccl_level = "level0:NA;level1:NA";
  }
  return ch;
}

std::string Describe(const HcclEnvChoice& ch) {
  std::string s = absl::StrFormat("# %s: %s", CollectiveName(ch.collective),
                                  ch.algorithm.empty() ? std::string("no algorithm HCCL_ALGO can name was measured at "
                                                                     "every size: NA")
                                                       : ch.algorithm);
  absl::StrAppend(&s, ch.live_calls > 0
                          ? absl::StrFormat(" (%d sizes weighted by %d reported calls)", ch.sizes, ch.live_calls)
                          : absl::StrFormat(" (%d sizes weighted evenly: no reported calls)", ch.sizes));
  for (const AlgorithmTotal& t : ch.totals) {
    absl::StrAppend(&s, absl::StrFormat("; %s %.3f ms", t.algorithm, t.total_us / 1e3));
    if (!t.nameable) {
      absl::StrAppend(&s, " (HCCL_ALGO cannot name the form: not chosen)");
    } else if (t.missing > 0) {
      absl::StrAppend(&s, absl::StrFormat(" (not measured at %d sizes: not compared)", t.missing));
    }
  }
  absl::StrAppend(&s, absl::StrFormat("; the table's per-size winners %.3f ms\n", ch.winners_us / 1e3));
  return s;
}

}  // namespace

std::vector<int> WorldSizes(const db::Table& table) {
  std::set<int> w;
  for (const db::TunedEntry& e : table.entries) w.insert(e.key.world_size);
  return {w.begin(), w.end()};
}

absl::StatusOr<db::Table> PickTable(db::TuningStore& store, const std::string& fingerprint,
                                    const std::string& runtime) {
  if (!fingerprint.empty()) {
    auto t = store.GetTable(fingerprint, 0);
    if (!t.ok()) return t.status();
    if (RuntimeOf(t->topology) != runtime) {
      return absl::FailedPreconditionError(absl::StrCat("table ", fingerprint, " was measured with ",
                                                        RuntimeOf(t->topology), ", not ", runtime, ": ",
                                                        t->topology.json));
    }
    return t;
  }
  auto tables = store.ListTables();
  if (!tables.ok()) return tables.status();
  std::vector<std::string> mine;
  for (const db::TableSummary& s : *tables) {
    if (RuntimeOf(s.topology) == runtime) mine.push_back(s.topology.fingerprint);
  }
  if (mine.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(mine.empty() ? "no tuned table of " : "several tuned tables of ", runtime,
                     mine.empty() ? std::string(" in the store") : absl::StrCat(": ", absl::StrJoin(mine, ", ")),
                     "; pass --topology FINGERPRINT (hccl-tune show lists them)"));
  }
  return store.GetTable(mine.front(), 0);
}

absl::StatusOr<HcclEnvExport> ExportHcclEnv(db::TuningStore& store, const std::string& fingerprint, int world) {
  auto table = PickTable(store, fingerprint, kOwnRuntime);
  if (!table.ok()) return table.status();
  const std::vector<int> worlds = WorldSizes(*table);
  if (world == 0) {
    if (worlds.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("table ", table->topology.fingerprint, " has world sizes ",
                                                     absl::StrJoin(worlds, ", "), ": pass --world N"));
    }
    world = worlds.front();
  } else if (std::find(worlds.begin(), worlds.end(), world) == worlds.end()) {
    return absl::NotFoundError(absl::StrCat("table ", table->topology.fingerprint, " has no entries at world ", world,
                                            "; it has ", absl::StrJoin(worlds, ", ")));
  }
  HcclEnvExport out;
  out.fingerprint = table->topology.fingerprint;
  out.world_size = world;
  out.table_version = table->version;
  Nodes nodes;
  if (auto d = ParseTopologyJson(table->topology.json); d.ok()) {
    out.nodes = static_cast<int>(d->ranks_per_node.size());
    nodes.several = out.nodes > 1;
    nodes.even = std::adjacent_find(d->ranks_per_node.begin(), d->ranks_per_node.end(), std::not_equal_to<>()) ==
                 d->ranks_per_node.end();
  }
  auto points = Medians(store, *table, world);
  if (!points.ok()) return points.status();
  const auto live = LiveWeights(store, out.fingerprint, world, *points);
  std::set<Collective> colls;
  for (const auto& [p, unused] : *points) colls.insert(std::get<0>(p));
  out.text = absl::StrCat("# HCCL_ALGO from table ", out.fingerprint, " version ", out.table_version, ", world ", world,
                          ", ", out.nodes, out.nodes == 1 ? " node" : " nodes", ": ", table->topology.json, "\n");
  absl::StrAppend(&out.text,
                  "# HCCL_ALGO names one algorithm per collective and level: no byte ranges, no chunk, channels or "
                  "link,\n# and only ring, H-D_R (halving_doubling) and pipeline (hierarchical). Per collective: the "
                  "algorithm with the least\n# time summed over the measured sizes (its best configuration at each "
                  "size), then the others.\n");
  if (nodes.several) {
    absl::StrAppend(&out.text, "# Between nodes level1:X runs hierarchical(inter=X) with form=auto, the ",
                    HierFormName(AutoForm(nodes)), " form on these ", nodes.even ? "even" : "uneven",
                    " nodes:\n# HCCL_ALGO has no word for the form, so a hierarchical form=",
                    HierFormName(nodes.even ? HierForm::kLeader : HierForm::kParallel),
                    " is totalled apart and never chosen.\n");
  }
  std::vector<std::string> parts;
  for (Collective c : colls) {
    HcclEnvChoice ch = Choose(c, *points, live, nodes);
    absl::StrAppend(&out.text, Describe(ch));
    parts.push_back(absl::StrCat(CollectiveName(c), "=", ch.hccl_level));
    out.choices.push_back(std::move(ch));
  }
  out.hccl_algo = absl::StrJoin(parts, "/");
  absl::StrAppend(&out.text, "export HCCL_ALGO='", out.hccl_algo, "'\n");
  return out;
}

}  // namespace hccltune::exporter

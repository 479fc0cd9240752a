#include "model/predict.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/formula.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"

namespace hccltune::model {
namespace {

struct ParsedCost {
  Formula steps;
  Formula bytes;
  Formula messages;
  registry::Crossing across;
};

// Every registry formula parsed once; a formula that does not parse is left out (the catalogue test fails on it).
const std::map<std::pair<Collective, std::string>, ParsedCost>& Costs() {
  static const auto* costs = [] {
    auto* out = new std::map<std::pair<Collective, std::string>, ParsedCost>();
    for (Collective c : AllCollectives()) {
      for (const std::string& name : registry::AlgorithmsFor(c)) {
        const registry::AlgorithmCost* cost = registry::Cost(c, name);
        if (cost == nullptr) continue;
        auto steps = Formula::Parse(cost->steps);
        auto bytes = Formula::Parse(cost->bytes);
        auto messages = Formula::Parse(cost->Messages());
        if (steps.ok() && bytes.ok() && messages.ok()) {
          out->emplace(std::make_pair(c, name), ParsedCost{*steps, *bytes, *messages, cost->across});
        }
      }
    }
    return out;
  }();
  return *costs;
}

double ReducedShare(Collective c) {
  if (c == Collective::kAllreduce) return 0.5;
  return c == Collective::kReducescatter || c == Collective::kReduce ? 1.0 : 0.0;
}

// Latency and overhead of `s` rounds and `k` messages on `link`.
double Rounds(const LinkCost& link, double s, double k) { return s * link.alpha_s + k * link.overhead_s; }

double Transfer(const ParsedCost& cost, const ClusterProfile& pr, const FormulaVars& v) {
  const auto eval = [](const Formula& f, const FormulaVars& at) { return std::max(0.0, f.Eval(at)); };
  const double s = eval(cost.steps, v), b = eval(cost.bytes, v), k = eval(cost.messages, v);
  if (v.m <= 1) return Rounds(pr.intra, s, k) + b * pr.intra.beta_s;
  const double nics = pr.nics_per_node;
  switch (cost.across) {
    case registry::Crossing::kOnePerNode:
      return Rounds(pr.inter, s, k) + b * std::max(pr.inter.beta_s, pr.intra.beta_s);
    case registry::Crossing::kEveryRank: {
      const double f = v.p > 1 ? (v.p - v.l) / (v.p - 1) : 0;
      return Rounds(pr.inter, s, k) + std::max(v.l * f * b * pr.inter.beta_s / nics, b * pr.intra.beta_s);
    }
    case registry::Crossing::kLevels: {
      FormulaVars in = v, across = v;
      in.m = 1;
      in.p = v.l;
      across.l = 1;
      across.p = v.m;
      return Rounds(pr.intra, eval(cost.steps, in), eval(cost.messages, in)) + eval(cost.bytes, in) * pr.intra.beta_s +
             Rounds(pr.inter, eval(cost.steps, across), eval(cost.messages, across)) +
             eval(cost.bytes, across) * pr.inter.beta_s / nics;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<double> PredictSeconds(const ClusterProfile& profile, Collective c, const std::string& algorithm,
                                      uint64_t chunk, const Shape& shape, uint64_t bytes) {
  auto it = Costs().find({c, algorithm});
  if (it == Costs().end()) {
    return absl::NotFoundError(absl::StrCat("no cost for ", CollectiveName(c), " ", algorithm));
  }
  FormulaVars v;
  v.l = shape.ranks_per_node;
  v.m = shape.nodes;
  v.p = v.l * v.m;
  v.n = static_cast<double>(bytes);
  v.c = static_cast<double>(std::max<uint64_t>(chunk, 1));
  double t = Transfer(it->second, profile, v);
  t += profile.gamma_s * std::max(0.0, it->second.bytes.Eval(v)) * ReducedShare(c);
  if (profile.cores_per_node > 0 && shape.ranks_per_node > profile.cores_per_node) {
    t *= static_cast<double>(shape.ranks_per_node) / profile.cores_per_node;
  }
  return t;
}

std::vector<Candidate> RankCandidates(const ClusterProfile& profile, Collective c, const Shape& shape, uint64_t bytes) {
  GroupTopology topo;
  topo.num_nodes = shape.nodes;
  topo.node_of.reserve(static_cast<size_t>(shape.ranks()));
  for (int k = 0; k < shape.nodes; ++k) topo.node_of.insert(topo.node_of.end(), shape.ranks_per_node, k);
  std::vector<Candidate> out;
  for (const std::string& name : registry::ListValid(c, shape.ranks(), topo)) {
    auto config = Configuration::Default(name);
    if (!config.ok()) continue;
    auto t = PredictSeconds(profile, c, name, config->chunk, shape, bytes);
    if (t.ok()) out.push_back({config->ToString(), *t});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
  return out;
}

}  // namespace hccltune::model

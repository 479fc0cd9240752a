#include "model/predict.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/formula.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/mailbox_block.h"

namespace hccltune::model {
namespace {

struct ParsedCost {
  Formula steps;
  Formula bytes;
  Formula messages;
  registry::Crossing across;
  std::optional<Formula> mailbox;  // the block of the mailbox form, where the algorithm has one
  std::optional<Formula> pulled;   // the bytes when receivers read by single copy, where they differ
  std::optional<Formula> mean;     // the bytes of the average rank, where less than the busiest's
};

// `text` parsed into `out` (left empty when `text` is); false when it does not parse.
bool ParseOptional(absl::string_view text, std::optional<Formula>* out) {
  if (text.empty()) return true;
  auto f = Formula::Parse(text);
  if (!f.ok()) return false;
  *out = *f;
  return true;
}

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
        std::optional<Formula> mailbox, pulled, mean;
        if (!ParseOptional(cost->mailbox, &mailbox) || !ParseOptional(cost->pulled, &pulled) ||
            !ParseOptional(cost->mean, &mean)) {
          continue;
        }
        if (steps.ok() && bytes.ok() && messages.ok()) {
          out->emplace(std::make_pair(c, name),
                       ParsedCost{*steps, *bytes, *messages, cost->across, mailbox, pulled, mean});
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

double At(const Formula& f, const FormulaVars& v) { return std::max(0.0, f.Eval(v)); }

// Whether `c`'s large messages over shm travel by single copy where the profile knows its size (the runtime's rule).
bool SingleCopies(Collective c, const TermContext& where) {
  return where.single_copy_bytes > 0 && SingleCopyCollective(c);
}

// The transfer terms of predict.h's table for `cost` at `v`.
void TransferTerms(const ParsedCost& cost, const FormulaVars& v, int nics, Terms* t) {
  const double s = At(cost.steps, v), b = At(cost.bytes, v), k = At(cost.messages, v);
  if (v.m <= 1) {
    t->s_intra = s, t->k_intra = k, t->b_intra = b;
    return;
  }
  switch (cost.across) {
    case registry::Crossing::kOnePerNode: t->s_inter = s, t->k_inter = k, t->b_inter = b, t->b_alt = b; return;
    case registry::Crossing::kEveryRank: {
      const double f = v.p > 1 ? (v.p - v.l) / (v.p - 1) : 0;
      t->s_inter = s, t->k_inter = k, t->b_inter = v.l * f * b / nics, t->b_alt = b;
      return;
    }
    case registry::Crossing::kDoubling:
    case registry::Crossing::kTree: {
      FormulaVars across = v;  // the rounds at distances of l or more: as on m nodes of one rank
      across.l = 1;
      across.p = v.m;
      const double si = At(cost.steps, across), ki = At(cost.messages, across), bi = At(cost.bytes, across);
      const double sharing = cost.across == registry::Crossing::kTree ? 1 : v.l;  // ranks of a node on its NICs
      t->s_inter = si, t->k_inter = ki, t->b_inter = sharing * bi / nics, t->b_alt = bi;
      t->s_intra = std::max(0.0, s - si), t->k_intra = std::max(0.0, k - ki), t->b_intra = std::max(0.0, b - bi);
      return;
    }
    case registry::Crossing::kLevels: {
      FormulaVars in = v, across = v;
      in.m = 1;
      in.p = v.l;
      across.l = 1;
      across.p = v.m;
      t->s_intra = At(cost.steps, in), t->k_intra = At(cost.messages, in), t->b_intra = At(cost.bytes, in);
      t->s_inter = At(cost.steps, across), t->k_inter = At(cost.messages, across);
      t->b_inter = At(cost.bytes, across) / nics;
      return;
    }
  }
}

// The terms every call pays whatever its algorithm: version 1's factor, version 2's call and its wait for a core.
void SetCallTerms(const Shape& shape, const TermContext& where, Terms* t) {
  const int busy = where.cores_shared ? shape.ranks_per_node * shape.nodes : shape.ranks_per_node;
  const bool oversubscribed = where.cores > 0 && busy > where.cores;
  if (where.version < 2) {
    if (oversubscribed) t->factor = static_cast<double>(shape.ranks_per_node) / where.cores;
    return;
  }
  t->calls = 1;
  t->inter_calls = shape.nodes > 1 ? 1 : 0;
  if (oversubscribed) t->excess = static_cast<double>(busy - where.cores) / where.cores;
}

// The configurations of `name` RankCandidates lists (predict.h).
std::vector<Configuration> Priced(Collective c, const std::string& name, const GroupTopology& topo) {
  auto config = Configuration::Default(name);
  if (!config.ok()) return {};
  if (name != "hierarchical" && !(c == Collective::kBroadcast && name == "chain")) return {*config};
  std::vector<Configuration> out;
  for (const Configuration& k : registry::Candidates(c, name, {})) {
    if (k.channels == config->channels && registry::CheckForm(c, k, topo).ok()) out.push_back(k);
  }
  return out;
}

}  // namespace

absl::StatusOr<Terms> CostTerms(Collective c, const std::string& algorithm, uint64_t chunk, const Shape& shape,
                                uint64_t bytes, const TermContext& where) {
  auto it = Costs().find({c, algorithm});
  if (it == Costs().end()) {
    return absl::NotFoundError(absl::StrCat("no cost for ", CollectiveName(c), " ", algorithm));
  }
  const ParsedCost& cost = it->second;
  FormulaVars v;
  v.l = shape.ranks_per_node;
  v.m = shape.nodes;
  v.p = v.l * v.m;
  v.n = static_cast<double>(bytes);
  v.c = static_cast<double>(std::max<uint64_t>(chunk, 1));
  Terms t;
  TransferTerms(cost, v, std::max(where.nics, 1), &t);
  t.reduced = At(cost.bytes, v) * ReducedShare(c);
  SetCallTerms(shape, where, &t);
  if (where.version < 2) return t;
  if (shape.nodes == 1 && where.link == LinkKind::kTcp) t.tcp = true;
  const bool shm = where.link == LinkKind::kAuto || where.link == LinkKind::kShm;
  if (shape.nodes == 1 && shm && v.p > 1 && cost.mailbox.has_value() &&
      At(*cost.mailbox, v) <= static_cast<double>(kMailboxBlockBytes)) {
    t.s_intra = 0, t.k_intra = 0, t.exchanges = 1;  // one exchange; the bytes are still read and written
  }
  double busiest = At(cost.bytes, v);
  if (shape.nodes == 1 && shm && cost.pulled.has_value() && SingleCopies(c, where)) {
    const double pulled = At(*cost.pulled, v);
    if (pulled >= static_cast<double>(where.single_copy_bytes) && pulled < t.b_intra) busiest = t.b_intra = pulled;
  }
  if (cost.mean.has_value() && busiest > 0) {
    const double share = std::min(1.0, At(*cost.mean, v) / busiest);
    t.b_spared = (1 - share) * t.wait_bytes();
  }
  return t;
}

uint64_t SingleCopyBytesAt(uint64_t dedicated, int ranks_per_node, int cores) {
  return cores > 0 && ranks_per_node > cores ? 2 * dedicated : dedicated;
}

double Evaluate(const Terms& t, const ClusterProfile& pr) {
  const LinkCost& node = t.tcp ? pr.intra_tcp : pr.intra;
  const double intra = t.s_intra * node.alpha_s + t.k_intra * node.overhead_s + t.b_intra * node.beta_s;
  const double inter = t.s_inter * pr.inter.alpha_s + t.k_inter * pr.inter.overhead_s +
                       std::max(t.b_inter * pr.inter.beta_s, t.b_alt * pr.intra.beta_s);
  if (pr.version < 2) return t.factor * (intra + inter + t.reduced * pr.gamma_s);
  return t.calls * pr.call_s + intra + inter + t.exchanges * pr.mailbox_s + t.reduced * pr.gamma_s +
         WaitSeconds(t, pr.oversubscribed) + InterWaitSeconds(t, pr.inter_oversubscribed);
}

double InterWaitSeconds(const Terms& t, const Oversubscribed& o) {
  return t.excess * (t.inter_calls * o.call_s + t.s_inter * o.round_s + t.b_inter * o.byte_s);
}

double WaitSeconds(const Terms& t, const Oversubscribed& o) {
  return t.excess * (o.call_s + t.rounds() * o.round_s + t.wait_bytes() * o.byte_s);
}

absl::StatusOr<double> PredictSeconds(const ClusterProfile& profile, Collective c, const std::string& algorithm,
                                      uint64_t chunk, const Shape& shape, uint64_t bytes, LinkKind link) {
  Configuration config;
  config.algorithm = algorithm;
  config.chunk = chunk;
  config.link.kind = link;
  return PredictSeconds(profile, c, config, shape, bytes);
}

absl::StatusOr<double> PredictSeconds(const ClusterProfile& profile, Collective c, const Configuration& config,
                                      const Shape& shape, uint64_t bytes) {
  if (shape.nodes > 1 && !profile.inter_known) {
    return absl::FailedPreconditionError(absl::StrCat("profile ", profile.name,
                                                      " never measured the network between nodes: no prediction for ",
                                                      shape.nodes, " nodes"));
  }
  auto t = ConfigTerms(
      c, config, shape, bytes,
      {profile.nics_per_node, profile.cores_per_node, profile.version, config.link.kind, profile.cores_shared,
       SingleCopyBytesAt(profile.single_copy_bytes, shape.ranks_per_node, profile.cores_per_node)});
  if (!t.ok()) return t.status();
  if (t->tcp && !profile.intra_tcp_known) {
    return absl::FailedPreconditionError(absl::StrCat("profile ", profile.name,
                                                      " never measured link=tcp inside a node: no prediction for ",
                                                      config.algorithm, " over tcp on one node"));
  }
  return Evaluate(*t, profile);
}

absl::StatusOr<Shape> PredictableShape(const std::string& topology_json) {
  auto d = ParseTopologyJson(topology_json);
  if (!d.ok()) return absl::FailedPreconditionError(absl::StrCat("topology JSON: ", d.status().message()));
  if (d->runtime != kOwnRuntime) {
    return absl::FailedPreconditionError(absl::StrCat("a table of ", d->runtime, " is never predicted"));
  }
  if (d->ranks_per_node.empty()) return absl::FailedPreconditionError("topology without nodes");
  for (int k : d->ranks_per_node) {
    if (k != d->ranks_per_node.front()) {
      return absl::FailedPreconditionError(
          absl::StrCat("uneven ranks per node (", absl::StrJoin(d->ranks_per_node, ","), ") are not predicted"));
    }
  }
  return Shape{static_cast<int>(d->ranks_per_node.size()), d->ranks_per_node.front()};
}

GroupTopology NodeMajorTopology(const Shape& shape) {
  GroupTopology topo;
  topo.num_nodes = shape.nodes;
  topo.node_of.reserve(static_cast<size_t>(shape.ranks()));
  for (int k = 0; k < shape.nodes; ++k) topo.node_of.insert(topo.node_of.end(), shape.ranks_per_node, k);
  return topo;
}

std::vector<Candidate> RankCandidates(const ClusterProfile& profile, Collective c, const Shape& shape, uint64_t bytes) {
  const GroupTopology topo = NodeMajorTopology(shape);
  std::vector<Candidate> out;
  for (const std::string& name : registry::ListValid(c, shape.ranks(), topo)) {
    for (const Configuration& config : Priced(c, name, topo)) {
      auto t = PredictSeconds(profile, c, config, shape, bytes);
      if (t.ok()) out.push_back({config.ToString(), *t});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
  return out;
}

}  // namespace hccltune::model

// A hierarchical configuration priced as the sum of its steps (model/predict.h, ConfigTerms). The steps are those of
// the algorithms' block comments (runtime/algorithms/*/hierarchical.cc) on m nodes of l ranks each:
//   allreduce              reducescatter(intra, n) | allreduce(inter, n/l), l at once | allgather(intra, n)
//   allgather, parallel    allgather(inter, n/l), l at once | allgather(intra, n)
//   allgather, leader      gather(intra, n/m) | allgatherv(inter, n) | broadcast(intra, n)
//   reducescatter, parallel reducescatter(intra, n) | reducescatter(inter, n/l), l at once
//   reducescatter, leader  reduce(intra, n) | reducescatter(inter, n) | scatter(intra, n/m)
//   broadcast              broadcast(inter, n) | broadcast(intra, n)
// An intra step runs on one node of l ranks, an inter step on m nodes of one rank each; "l at once": every local
// rank runs its own inter step over its own connections, so the node's NICs carry l of them. Each step after the
// first is a call of its own that starts when the ranks it needs are awake: on an oversubscribed host it waits as a
// call across nodes does (Terms::inter_calls; measured: without it the 4 x 2 emulated cluster's hierarchical
// allreduce of 8 KiB took 1.9x its prediction).
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/predict.h"
#include "runtime/algorithms/registry.h"
#include "runtime/selector/selector.h"

namespace hccltune::model {
namespace {

struct Step {
  Collective c;
  bool inter;    // between nodes (m x 1) or inside one node (1 x l)
  double bytes;  // the step's n
  int at_once;   // inter steps running side by side on a node's NICs
};

std::vector<Step> StepsOf(Collective c, bool leader, const Shape& s, double n) {
  const int l = s.ranks_per_node, m = s.nodes;
  using C = Collective;
  switch (c) {
    case C::kAllreduce:
      return {{C::kReducescatter, false, n, 1}, {C::kAllreduce, true, n / l, l}, {C::kAllgather, false, n, 1}};
    case C::kAllgather:
      if (leader) return {{C::kGather, false, n / m, 1}, {C::kAllgatherv, true, n, 1}, {C::kBroadcast, false, n, 1}};
      return {{C::kAllgather, true, n / l, l}, {C::kAllgather, false, n, 1}};
    case C::kReducescatter:
      if (leader) return {{C::kReduce, false, n, 1}, {C::kReducescatter, true, n, 1}, {C::kScatter, false, n / m, 1}};
      return {{C::kReducescatter, false, n, 1}, {C::kReducescatter, true, n / l, l}};
    case C::kBroadcast: return {{C::kBroadcast, true, n, 1}, {C::kBroadcast, false, n, 1}};
    default: return {};
  }
}

// The configuration the runtime runs for a step (runtime/algorithms/hierarchy.cc, StepConfig): the given part when
// its algorithm exists for the step's collective, else what the selector chooses for the step, on the given part's
// link.
Configuration StepConfig(const std::shared_ptr<const Configuration>& given, const Step& step, const Shape& s) {
  if (given != nullptr && registry::Find(step.c, given->algorithm) != nullptr) return *given;
  const int group = step.inter ? s.nodes : s.ranks_per_node;
  Configuration chosen =
      Selector::ChooseStep(step.c, static_cast<uint64_t>(step.bytes), group, step.inter ? s.nodes : 1);
  if (given != nullptr && chosen.Has(ParamKind::kLink) && given->Has(ParamKind::kLink)) chosen.link = given->link;
  return chosen;
}

void Add(const Terms& sub, double nic_share, Terms* t) {
  t->s_intra += sub.s_intra, t->k_intra += sub.k_intra, t->b_intra += sub.b_intra;
  t->s_inter += sub.s_inter, t->k_inter += sub.k_inter, t->b_inter += sub.b_inter * nic_share;
  t->b_alt += sub.b_alt, t->reduced += sub.reduced, t->exchanges += sub.exchanges, t->b_spared += sub.b_spared;
}

}  // namespace

absl::StatusOr<Terms> ConfigTerms(Collective c, const Configuration& config, const Shape& shape, uint64_t bytes,
                                  TermContext where) {
  where.link = config.link.kind;
  auto top = CostTerms(c, config.algorithm, config.chunk, shape, bytes, where);
  if (!top.ok() || where.version < 2 || config.algorithm != "hierarchical" || shape.nodes < 2 ||
      shape.ranks_per_node < 2) {
    return top;
  }
  const std::vector<Step> steps = StepsOf(c, config.form == HierForm::kLeader, shape, static_cast<double>(bytes));
  if (steps.empty()) return top;
  Terms t = *top;
  t.s_intra = t.k_intra = t.b_intra = t.s_inter = t.k_inter = t.b_inter = t.b_alt = t.reduced = t.exchanges = 0;
  t.b_spared = 0;
  for (const Step& step : steps) {
    const Configuration part = StepConfig(step.inter ? config.inter : config.intra, step, shape);
    const Shape at = step.inter ? Shape{shape.nodes, 1} : Shape{1, shape.ranks_per_node};
    TermContext alone = where;
    alone.nics = 1, alone.cores = 0, alone.link = part.link.kind, alone.cores_shared = false;
    auto sub = CostTerms(step.c, part.algorithm, part.chunk, at, static_cast<uint64_t>(step.bytes), alone);
    if (!sub.ok()) {
      return absl::NotFoundError(absl::StrCat(CollectiveName(c), " ", config.ToString(), ": step ",
                                              CollectiveName(step.c), " ", part.algorithm, ": ",
                                              sub.status().message()));
    }
    Add(*sub, static_cast<double>(step.at_once) / std::max(where.nics, 1), &t);
  }
  t.inter_calls += static_cast<double>(steps.size() - 1);  // each later step's start (see the top)
  return t;
}

}  // namespace hccltune::model

#include "runtime/algorithms/hierarchy.h"

#include <set>

#include "runtime/algorithms/registry.h"

namespace hccltune::algo {
namespace {

// How many nodes the group ranks `members` are on.
int NodesOf(AlgorithmContext& ctx, const std::vector<int>& members) {
  std::set<int> nodes;
  for (int r : members) nodes.insert(ctx.topology().node_of[static_cast<size_t>(r)]);
  return static_cast<int>(nodes.size());
}

}  // namespace

std::vector<int> Levels::Cross(int j) const {
  std::vector<int> out;
  for (const auto& n : nodes) {
    if (static_cast<int>(n.size()) > j) out.push_back(n[static_cast<size_t>(j)]);
  }
  return out;
}

std::vector<int> Levels::Leaders(int root) const {
  std::vector<int> out;
  const int root_node = NodeOf(root);
  for (size_t k = 0; k < nodes.size(); ++k) out.push_back(static_cast<int>(k) == root_node ? root : nodes[k][0]);
  return out;
}

int Levels::NodeOf(int r) const {
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (int x : nodes[k]) {
      if (x == r) return static_cast<int>(k);
    }
  }
  return -1;
}

int Levels::LocalOf(int r) const {
  for (const auto& n : nodes) {
    for (size_t i = 0; i < n.size(); ++i) {
      if (n[i] == r) return static_cast<int>(i);
    }
  }
  return -1;
}

Levels SplitLevels(const GroupTopology& topo, int rank) {
  Levels lv;
  lv.nodes.resize(static_cast<size_t>(topo.num_nodes));
  for (size_t r = 0; r < topo.node_of.size(); ++r) {
    lv.nodes.at(static_cast<size_t>(topo.node_of[r])).push_back(static_cast<int>(r));
  }
  std::erase_if(lv.nodes, [](const std::vector<int>& n) { return n.empty(); });
  lv.node = lv.NodeOf(rank);
  lv.local = lv.LocalOf(rank);
  for (const auto& n : lv.nodes) lv.uniform = lv.uniform && n.size() == lv.mine().size();
  return lv;
}

absl::StatusOr<bool> LeaderForm(const Configuration& config, const Levels& lv) {
  if (config.form == HierForm::kParallel && !lv.uniform) {
    return absl::InvalidArgumentError(
        "hierarchical(form=parallel) needs as many ranks on every node; these nodes are uneven: form=leader or "
        "form=auto runs here");
  }
  return config.form == HierForm::kLeader || !lv.uniform;
}

CollectiveArgs StepArgs(const CollectiveArgs& args) {
  CollectiveArgs sub;
  sub.dtype = args.dtype;
  sub.op = args.op == ReduceOp::kAvg ? ReduceOp::kSum : args.op;
  return sub;
}

absl::StatusOr<Configuration> StepConfig(AlgorithmContext& ctx, const std::shared_ptr<const Configuration>& given,
                                         Collective c, uint64_t bytes, size_t group_size, int nodes) {
  if (given != nullptr && registry::Find(c, given->algorithm) != nullptr) return *given;
  absl::StatusOr<Configuration> d = ctx.ChooseStep(c, bytes, static_cast<int>(group_size), nodes);
  if (!d.ok()) return d.status();
  if (given != nullptr && given->Has(ParamKind::kLink) && d->Has(ParamKind::kLink)) d->link = given->link;
  return d;
}

absl::Status RunStep(AlgorithmContext& ctx, CollectiveArgs& sub, Collective c,
                     const std::shared_ptr<const Configuration>& given, uint64_t bytes,
                     const std::vector<int>& members) {
  sub.collective = c;
  absl::StatusOr<Configuration> step = StepConfig(ctx, given, c, bytes, members.size(), NodesOf(ctx, members));
  if (!step.ok()) return step.status();
  return ctx.RunSubCollective(sub, *step, members);
}

}  // namespace hccltune::algo

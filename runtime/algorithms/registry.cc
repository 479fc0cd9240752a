#include "runtime/algorithms/registry.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/algorithms/all_algorithms.h"
#include "runtime/common/sizes.h"

namespace hccltune {
namespace registry {
namespace {

using C = Collective;
using X = Crossing;

// What an algorithm needs before it is meaningful for a group (IsValid); every algorithm runs correctly anywhere.
enum class Needs : uint8_t {
  kNothing,
  kSymmetricBuffers,  // the call's buffers in symmetric memory: the communicator picks it itself for those
  kSeveralLevels,     // at least 2 nodes and a node with at least 2 ranks (a step per level)
};

// The inter-node steps the sweep tries for a hierarchical algorithm, per collective (its intra step is its default,
// ring — the selector's choice for a collective without one — on link=auto).
constexpr absl::string_view kHierarchicalInterSteps[] = {"ring", "halving_doubling", "recursive_doubling"};
constexpr absl::string_view kAllgatherInterSteps[] = {"ring", "recursive_doubling", "direct"};
constexpr absl::string_view kReducescatterInterSteps[] = {"ring", "halving_doubling", "direct"};
constexpr absl::string_view kBroadcastInterSteps[] = {"binomial_tree", "chain", "linear"};

struct Entry {
  Collective collective;
  absl::string_view name;
  AlgorithmCost cost;  // registry.h says what the expressions mean
  AlgorithmFn fn;
  ExchangeFn exchange = nullptr;  // the mailbox form, where the algorithm has one
  Needs needs = Needs::kNothing;
  // For an algorithm of steps (intra/inter parameters): the algorithms the sweep tries for the inter step.
  absl::Span<const absl::string_view> inter_steps = {};
  // For a hierarchical algorithm with both forms (HierForm: parallel and leader): the sweep tries each.
  bool forms = false;
};

// Registry order = the order AlgorithmsFor() lists and the sweep tries.
constexpr Entry kEntries[] = {
    {C::kAllreduce, "ring", {"2*(p-1)", "2*(p-1)*n/p", X::kOnePerNode}, &algo::AllreduceRing},
    {C::kAllreduce, "double_ring", {"2*(p-1)", "2*(p-1)*n/p", X::kOnePerNode}, &algo::AllreduceDoubleRing},
    {C::kAllreduce,
     "halving_doubling",
     {"2*floor(log2(p))+2*fold(p)", "2*(pow2(p)-1)*n/pow2(p)+fold(p)*n", X::kDoubling},
     &algo::AllreduceHalvingDoubling},
    {C::kAllreduce,
     "recursive_doubling",
     {"floor(log2(p))+2*fold(p)", "(floor(log2(p))+fold(p))*n", X::kDoubling},
     &algo::AllreduceRecursiveDoubling},
    {C::kAllreduce,
     "binomial_tree",
     {"2*ceil(log2(p))", "ceil(log2(p))*n", X::kTree, {}, {}, {}, "2*(p-1)*n/p"},
     &algo::AllreduceBinomialTree},
    {C::kAllreduce,
     "double_binary_tree",
     {"2*ceil(log2(p))+min(1,p-1)*max(0,ceil(n/(2*c))-1)", "min(2,p/2)*min(1,p-1)*n"},
     &algo::AllreduceDoubleBinaryTree},
    {C::kAllreduce,
     "one_shot",
     {"min(1,p-1)", "(p-1)*n", X::kEveryRank, "p-1", "n"},
     &algo::AllreduceOneShot,
     &algo::AllreduceOneShotExchange},
    {C::kAllreduce,
     "hierarchical",
     {"2*(l-1)+2*(m-1)", "2*(l-1)*n/l+2*(m-1)*n/(m*l)", X::kLevels},
     &algo::AllreduceHierarchical,
     nullptr,
     Needs::kSeveralLevels,
     kHierarchicalInterSteps},
    {C::kAllreduce, "symmetric", {"2*min(1,p-1)", "0"}, &algo::AllreduceSymmetric, nullptr, Needs::kSymmetricBuffers},
    {C::kAllgather, "ring", {"p-1", "(p-1)*n/p", X::kOnePerNode}, &algo::AllgatherRing},
    {C::kAllgather,
     "recursive_doubling",
     {"floor(log2(p))+2*fold(p)", "(pow2(p)-1)*n/pow2(p)+fold(p)*n", X::kDoubling},
     &algo::AllgatherRecursiveDoubling},
    {C::kAllgather, "bruck", {"ceil(log2(p))", "(p-1)*n/p", X::kDoubling}, &algo::AllgatherBruck},
    {C::kAllgather,
     "direct",
     {"min(1,p-1)", "(p-1)*n/p", X::kEveryRank, "p-1", "n/p"},
     &algo::AllgatherDirect,
     &algo::AllgatherDirectExchange},
    {C::kAllgather,
     "hierarchical",
     {"(l-1)+(m-1)", "(l-1)*n/l+(m-1)*n/(m*l)", X::kLevels},
     &algo::AllgatherHierarchical,
     nullptr,
     Needs::kSeveralLevels,
     kAllgatherInterSteps,
     true},
    {C::kAllgather, "symmetric", {"2*min(1,p-1)", "0"}, &algo::AllgatherSymmetric, nullptr, Needs::kSymmetricBuffers},
    {C::kAllgatherv, "ring", {"p-1", "(p-1)*n/p", X::kOnePerNode}, &algo::AllgathervRing},
    {C::kAllgatherv, "direct", {"min(1,p-1)", "(p-1)*n/p", X::kEveryRank, "p-1"}, &algo::AllgathervDirect},
    {C::kReducescatter, "ring", {"p-1", "(p-1)*n/p", X::kOnePerNode}, &algo::ReducescatterRing},
    {C::kReducescatter,
     "halving_doubling",
     {"floor(log2(p))+2*fold(p)", "(pow2(p)-1)*n/pow2(p)+fold(p)*n", X::kDoubling},
     &algo::ReducescatterHalvingDoubling},
    {C::kReducescatter,
     "direct",
     {"min(1,p-1)", "(p-1)*n/p", X::kEveryRank, "p-1", "n"},
     &algo::ReducescatterDirect,
     &algo::ReducescatterDirectExchange},
    {C::kReducescatter,
     "hierarchical",
     {"(l-1)+(m-1)", "(l-1)*n/l+(m-1)*n/(m*l)", X::kLevels},
     &algo::ReducescatterHierarchical,
     nullptr,
     Needs::kSeveralLevels,
     kReducescatterInterSteps,
     true},
    {C::kReducescatter,
     "symmetric",
     {"2*min(1,p-1)", "0"},
     &algo::ReducescatterSymmetric,
     nullptr,
     Needs::kSymmetricBuffers},
    {C::kBroadcast,
     "binomial_tree",
     {"ceil(log2(p))", "ceil(log2(p))*n", X::kTree, {}, {}, {}, "(p-1)*n/p"},
     &algo::BroadcastBinomialTree},
    {C::kBroadcast,
     "chain",
     {"max(0,p-2+ceil(n/c))", "min(1,p-1)*(n+max(0,m-2)*min(c,n))", X::kOnePerNode},
     &algo::BroadcastChain},
    {C::kBroadcast,
     "linear",
     {"min(1,p-1)", "(p-1)*n", X::kEveryRank, "p-1", {}, "n", "(p-1)*n/p"},
     &algo::BroadcastLinear},
    {C::kBroadcast, "scatter_allgather", {"min(1,p-1)+p-1", "2*(p-1)*n/p"}, &algo::BroadcastScatterAllgather},
    {C::kBroadcast,
     "hierarchical",
     {"ceil(log2(m))+ceil(log2(l))", "(ceil(log2(m))+ceil(log2(l)))*n", X::kLevels},
     &algo::BroadcastHierarchical,
     nullptr,
     Needs::kSeveralLevels,
     kBroadcastInterSteps},
    {C::kBroadcast, "symmetric", {"2*min(1,p-1)", "0"}, &algo::BroadcastSymmetric, nullptr, Needs::kSymmetricBuffers},
    {C::kReduce,
     "binomial_tree",
     {"ceil(log2(p))", "ceil(log2(p))*n", X::kTree, {}, {}, {}, "(p-1)*n/p"},
     &algo::ReduceBinomialTree},
    {C::kReduce, "reducescatter_gather", {"p-1+min(1,p-1)", "2*(p-1)*n/p"}, &algo::ReduceReducescatterGather},
    {C::kGather, "binomial_tree", {"ceil(log2(p))", "(p-1)*n/p", X::kTree}, &algo::GatherBinomialTree},
    {C::kGather, "linear", {"min(1,p-1)", "(p-1)*n/p", X::kEveryRank, "p-1"}, &algo::GatherLinear},
    {C::kScatter, "binomial_tree", {"ceil(log2(p))", "(p-1)*n/p", X::kTree}, &algo::ScatterBinomialTree},
    {C::kScatter, "linear", {"min(1,p-1)", "(p-1)*n/p", X::kEveryRank, "p-1"}, &algo::ScatterLinear},
    {C::kAlltoall, "pairwise", {"p-1", "(p-1)*n/p"}, &algo::AlltoallPairwise},
    {C::kAlltoall, "bruck", {"ceil(log2(p))", "ceil(log2(p))*n/2"}, &algo::AlltoallBruck},
    {C::kAlltoall,
     "direct",
     {"min(1,p-1)", "(p-1)*n/p", X::kEveryRank, "p-1", "n"},
     &algo::AlltoallDirect,
     &algo::AlltoallDirectExchange},
    {C::kAlltoallv, "pairwise", {"p-1", "(p-1)*n/p"}, &algo::AlltoallvPairwise},
    {C::kBarrier, "dissemination", {"ceil(log2(p))", "0"}, &algo::BarrierDissemination},
    {C::kBarrier,
     "one_shot",
     {"min(1,p-1)", "0", X::kEveryRank, "p-1", "0"},
     &algo::BarrierOneShot,
     &algo::BarrierOneShotExchange},
};

const Entry* FindEntry(Collective c, absl::string_view name) {
  for (const Entry& e : kEntries) {
    if (e.collective == c && e.name == name) return &e;
  }
  return nullptr;
}

// OK when the nodes of `topo` give a step per level: at least 2 nodes, and a node with at least 2 ranks.
absl::Status CheckSeveralLevels(absl::string_view algorithm, int world_size, const GroupTopology& topo) {
  if (static_cast<int>(topo.node_of.size()) != world_size) {
    return absl::FailedPreconditionError(
        absl::StrCat(algorithm, " needs the topology of all ", world_size, " ranks, got ", topo.node_of.size()));
  }
  std::vector<int> per_node(static_cast<size_t>(std::max(topo.num_nodes, 0)), 0);
  for (int node : topo.node_of) {
    if (node < 0 || node >= topo.num_nodes) return absl::InvalidArgumentError("topology node index out of range");
    ++per_node[static_cast<size_t>(node)];
  }
  int biggest = 0;
  for (int k : per_node) biggest = std::max(biggest, k);
  if (topo.num_nodes < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat(algorithm, " needs at least 2 nodes; all ", world_size, " ranks are on one node"));
  }
  if (biggest < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat(algorithm, " needs a node with at least 2 ranks; every one of the ", topo.num_nodes,
                     " nodes has one rank (the inter-node step alone would be the whole collective)"));
  }
  return absl::OkStatus();
}

// Whether every node of `topo` that has ranks has as many as the others; "2, 1"-style counts in `counts`.
bool EvenNodes(const GroupTopology& topo, std::string* counts) {
  std::vector<int> per_node(static_cast<size_t>(std::max(topo.num_nodes, 0)), 0);
  for (int node : topo.node_of) {
    if (node >= 0 && node < topo.num_nodes) ++per_node[static_cast<size_t>(node)];
  }
  std::erase(per_node, 0);
  *counts = absl::StrJoin(per_node, ", ");
  return std::adjacent_find(per_node.begin(), per_node.end(), std::not_equal_to<>()) == per_node.end();
}

}  // namespace

AlgorithmFn Find(Collective c, absl::string_view name) {
  // The entry each collective found last on this thread: a call compares one name instead of scanning the
  // table (a tenth of a small call's own instructions went to the scan).
  thread_local const Entry* last[kNumCollectives] = {};
  const size_t ci = static_cast<size_t>(c);
  if (ci < static_cast<size_t>(kNumCollectives) && last[ci] != nullptr && last[ci]->name == name) return last[ci]->fn;
  for (const Entry& e : kEntries) {
    if (e.collective == c && e.name == name) {
      if (ci < static_cast<size_t>(kNumCollectives)) last[ci] = &e;
      return e.fn;
    }
  }
  return nullptr;
}

absl::string_view CrossingName(Crossing c) {
  switch (c) {
    case Crossing::kOnePerNode: return "one per node";
    case Crossing::kLevels: return "levels";
    case Crossing::kDoubling: return "doubling";
    case Crossing::kTree: return "tree";
    case Crossing::kEveryRank: break;
  }
  return "every rank";
}

const AlgorithmCost* Cost(Collective c, absl::string_view name) {
  for (const Entry& e : kEntries) {
    if (e.collective == c && e.name == name) return &e.cost;
  }
  return nullptr;
}

ExchangeFn FindExchange(Collective c, absl::string_view name) {
  const Entry* e = FindEntry(c, name);
  return e == nullptr ? nullptr : e->exchange;
}

std::vector<std::string> AlgorithmsFor(Collective c) {
  std::vector<std::string> out;
  for (const Entry& e : kEntries) {
    if (e.collective == c) out.emplace_back(e.name);
  }
  return out;
}

std::vector<ParamKind> Params(absl::string_view name) {
  const AlgorithmSpec* spec = FindAlgorithmSpec(name);
  return spec == nullptr ? std::vector<ParamKind>{} : spec->params;
}

absl::Status IsValid(Collective c, absl::string_view algorithm, int world_size, const GroupTopology& topo) {
  const Entry* e = FindEntry(c, algorithm);
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("no algorithm '", algorithm, "' for ", CollectiveName(c),
                                            "; accepted: ", absl::StrJoin(AlgorithmsFor(c), ", ")));
  }
  if (world_size < 1) return absl::InvalidArgumentError(absl::StrCat("world size ", world_size, " < 1"));
  switch (e->needs) {
    case Needs::kNothing: return absl::OkStatus();
    case Needs::kSymmetricBuffers:
      // Not a candidate for the sweep or `--algo all`: it needs the call's buffers in symmetric memory, and the
      // communicator picks it by itself for those (CommImpl::ChooseSymmetric).
      return absl::FailedPreconditionError(
          absl::StrCat(algorithm,
                       " runs only on buffers from Communicator::AllocSymmetric (hccltune_mem_alloc); `auto` picks it "
                       "for such buffers"));
    case Needs::kSeveralLevels: return CheckSeveralLevels(algorithm, world_size, topo);
  }
  return absl::OkStatus();
}

absl::Status CheckForm(Collective c, const Configuration& config, const GroupTopology& topo) {
  if (config.form == HierForm::kAuto) return absl::OkStatus();
  const std::string given = absl::StrCat(config.algorithm, "(form=", HierFormName(config.form), ")");
  const Entry* e = FindEntry(c, config.algorithm);
  if (e == nullptr || !e->forms) {
    return absl::InvalidArgumentError(absl::StrCat(given, ": ", CollectiveName(c), "'s ", config.algorithm,
                                                   " has one form; accepted: form=auto (hierarchical allgather and "
                                                   "reducescatter take parallel or leader)"));
  }
  std::string counts;
  if (config.form == HierForm::kParallel && !EvenNodes(topo, &counts)) {
    return absl::InvalidArgumentError(
        absl::StrCat(given, ": ", CollectiveName(c),
                     " runs every local rank in parallel only when every node has as many ranks; "
                     "ranks per node here: ",
                     counts, "; accepted here: form=leader, form=auto"));
  }
  return absl::OkStatus();
}

std::vector<std::string> ListValid(Collective c, int world_size, const GroupTopology& topo) {
  std::vector<std::string> out;
  for (const std::string& name : AlgorithmsFor(c)) {
    if (IsValid(c, name, world_size, topo).ok()) out.push_back(name);
  }
  return out;
}

std::vector<uint64_t> ChunkCandidates() { return {64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024}; }
std::vector<int> ChannelCandidates() { return {1, 2, 4}; }

std::vector<Configuration> Candidates(Collective c, absl::string_view algorithm, absl::Span<const LinkSpec> links) {
  std::vector<Configuration> out;
  if (Find(c, algorithm) == nullptr) return out;
  std::vector<LinkSpec> link_values(links.begin(), links.end());
  if (link_values.empty()) link_values.push_back(LinkSpec{});
  absl::StatusOr<Configuration> base = Configuration::Default(algorithm);
  if (!base.ok()) return out;
  if (base->Has(ParamKind::kIntra) || base->Has(ParamKind::kInter)) {
    // An algorithm of steps: its default intra step on link=auto (inside a node `auto` is shared memory; the
    // sweep's links are the networks between nodes, and a flat tcp@NET intra step would send node-local traffic
    // through the TCP stack), each listed inter step on every link.
    const Entry* e = FindEntry(c, algorithm);
    for (absl::string_view inter : e->inter_steps) {
      for (const LinkSpec& link : link_values) {
        Configuration cfg = *base;
        auto in = Configuration::Default(inter);
        if (!in.ok() || cfg.intra == nullptr) continue;
        Configuration intra = *cfg.intra;
        intra.link = LinkSpec{};
        in->link = link;
        cfg.intra = std::make_shared<const Configuration>(std::move(intra));
        cfg.inter = std::make_shared<const Configuration>(*std::move(in));
        if (!e->forms) {
          out.push_back(cfg);
          continue;
        }
        for (HierForm form : {HierForm::kParallel, HierForm::kLeader}) {
          cfg.form = form;
          out.push_back(cfg);
        }
      }
    }
    return out;
  }
  const std::vector<uint64_t> chunks =
      base->Has(ParamKind::kChunk) ? ChunkCandidates() : std::vector<uint64_t>{base->chunk};
  const std::vector<int> channels =
      base->Has(ParamKind::kChannels) ? ChannelCandidates() : std::vector<int>{base->channels};
  const std::vector<LinkSpec> lks = base->Has(ParamKind::kLink) ? link_values : std::vector<LinkSpec>{base->link};
  for (uint64_t chunk : chunks) {
    for (int ch : channels) {
      for (const LinkSpec& link : lks) {
        Configuration cfg = *base;
        cfg.chunk = chunk;
        cfg.channels = ch;
        cfg.link = link;
        out.push_back(cfg);
      }
    }
  }
  return out;
}

absl::Status Run(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  const AlgorithmFn fn = Find(args.collective, config.algorithm);
  if (fn == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("no algorithm '", config.algorithm, "' for ", CollectiveName(args.collective),
                     "; accepted: ", absl::StrJoin(AlgorithmsFor(args.collective), ", ")));
  }
  if (IsReducing(args.collective)) {
    if (absl::Status s = CheckReduceSupported(args.op, args.dtype); !s.ok()) return s;
  }
  const int world = static_cast<int>(ctx.topology().node_of.size());
  const bool rooted = args.collective == C::kBroadcast || args.collective == C::kReduce ||
                      args.collective == C::kGather || args.collective == C::kScatter;
  if (rooted && world > 0 && (args.root < 0 || args.root >= world)) {
    return absl::InvalidArgumentError(
        absl::StrCat(CollectiveName(args.collective), ": root ", args.root, " out of range [0, ", world, ")"));
  }
  return fn(args, config, ctx);
}

}  // namespace registry

absl::Status AgreedVerdict(absl::Status s) {
  s.SetPayload(kAgreedVerdictPayload, absl::Cord("1"));
  return s;
}

bool IsAgreedVerdict(const absl::Status& s) { return s.GetPayload(kAgreedVerdictPayload).has_value(); }

}  // namespace hccltune

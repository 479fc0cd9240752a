// Running a collective on a subset of a group: SubEndpoint maps sub-ranks onto the parent endpoint's ranks,
// and SubgroupContext is an AlgorithmContext for the subset, built on the parent's. The communicator's
// RunSubCollective (and the test context) use them:
//
//   SubgroupContext sub(parent_ctx, members, [&](size_t b) { return my_sub_scratch.Get(b); });
//   return registry::Run(args, config, sub);
//
// Messages of a sub-collective share the parent's per-pair FIFO order, so a parent must not leave its own
// messages to members in flight across a sub-collective (hierarchical steps run one after another).
// Thread-safety: like the parent endpoint/context, one thread at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/algorithms/algorithm.h"
#include "runtime/transport/endpoint.h"

namespace hccltune {

class SubEndpoint : public Endpoint, public RecvReduceEndpoint {
 public:
  // REQUIRES: members ascending, in [0, parent->size()), containing parent->rank().
  SubEndpoint(Endpoint* parent, std::vector<int> members)
      : parent_(parent), parent_caps_(parent->capabilities()), members_(std::move(members)) {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i] == parent_->rank()) rank_ = static_cast<int>(i);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  int ParentRank(int sub_rank) const { return members_[static_cast<size_t>(sub_rank)]; }

  OpHandle Isend(int peer, const void* data, size_t bytes) override {
    ++stats_.sends;
    stats_.bytes_sent += bytes;
    return parent_->Isend(ParentRank(peer), data, bytes);
  }
  OpHandle Irecv(int peer, void* data, size_t bytes) override {
    ++stats_.recvs;
    stats_.bytes_received += bytes;
    return parent_->Irecv(ParentRank(peer), data, bytes);
  }
  // Receive-and-reduce where the parent has it (its other abilities are not offered: they assume the whole group).
  EndpointCapabilities capabilities() override {
    EndpointCapabilities caps;
    if (parent_caps_.recv_reduce != nullptr) caps.recv_reduce = this;
    return caps;
  }
  OpHandle IrecvReduce(int peer, void* out, const void* local, size_t bytes, const Combiner* combiner) override {
    ++stats_.recvs;
    stats_.bytes_received += bytes;
    return parent_caps_.recv_reduce->IrecvReduce(ParentRank(peer), out, local, bytes, combiner);
  }
  absl::Status Wait(OpHandle op) override { return parent_->Wait(op); }
  absl::Status WaitAll() override { return parent_->WaitAll(); }
  EndpointStats stats() const override { return stats_; }
  void ResetStats() override { stats_ = EndpointStats{}; }

 private:
  Endpoint* parent_;
  EndpointCapabilities parent_caps_;  // asked once
  std::vector<int> members_;
  int rank_ = -1;
  EndpointStats stats_;
};

// The topology of `members` (ascending group ranks) within `parent`, node indices renumbered densely in order
// of first appearance.
inline GroupTopology RestrictTopology(const GroupTopology& parent, absl::Span<const int> members) {
  GroupTopology t;
  std::map<int, int> dense;
  for (int m : members) {
    const int node = static_cast<size_t>(m) < parent.node_of.size() ? parent.node_of[static_cast<size_t>(m)] : 0;
    auto it = dense.emplace(node, static_cast<int>(dense.size())).first;
    t.node_of.push_back(it->second);
  }
  t.num_nodes = static_cast<int>(dense.size());
  return t;
}

// An AlgorithmContext for a subset of the parent's group.
class SubgroupContext : public AlgorithmContext {
 public:
  using ScratchFn = std::function<void*(size_t)>;

  // `scratch` hands out this sub-collective's own scratch region (distinct from the parent's).
  SubgroupContext(AlgorithmContext& parent, absl::Span<const int> members, ScratchFn scratch)
      : parent_(parent),
        members_(members.begin(), members.end()),
        topology_(RestrictTopology(parent.topology(), members)),
        scratch_(std::move(scratch)) {}

  absl::StatusOr<Endpoint*> GetEndpoint(const LinkSpec& link) override {
    const std::string key = std::to_string(static_cast<int>(link.kind)) + "@" + link.network;
    auto it = endpoints_.find(key);
    if (it != endpoints_.end()) return it->second.get();
    absl::StatusOr<Endpoint*> ep = parent_.GetEndpoint(link);
    if (!ep.ok()) return ep.status();
    auto sub = std::make_unique<SubEndpoint>(*ep, members_);
    if (sub->rank() < 0) return absl::InvalidArgumentError("sub-collective members do not include this rank");
    Endpoint* raw = sub.get();
    endpoints_.emplace(key, std::move(sub));
    return raw;
  }
  const GroupTopology& topology() const override { return topology_; }
  int rank() const override {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i] == parent_.rank()) return static_cast<int>(i);
    }
    return -1;
  }
  void* Scratch(size_t bytes) override { return scratch_(bytes); }
  // Nested sub-collectives: `members` are ranks of this subgroup; mapped to the parent's ranks.
  absl::Status RunSubCollective(const CollectiveArgs& args, const Configuration& config,
                                absl::Span<const int> members) override {
    std::vector<int> mapped;
    mapped.reserve(members.size());
    for (int m : members) mapped.push_back(members_.at(static_cast<size_t>(m)));
    return parent_.RunSubCollective(args, config, mapped);
  }
  absl::StatusOr<Configuration> ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes) override {
    return parent_.ChooseStep(c, bytes, group_size, nodes);
  }

 private:
  AlgorithmContext& parent_;
  std::vector<int> members_;
  GroupTopology topology_;
  ScratchFn scratch_;
  std::map<std::string, std::unique_ptr<SubEndpoint>> endpoints_;
};

}  // namespace hccltune

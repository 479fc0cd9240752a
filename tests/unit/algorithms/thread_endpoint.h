// Test-only in-process transport: a group of N ranks run as N threads of one process.
//
// ThreadFabric holds one FIFO of messages per ordered pair (src, dst). ThreadEndpoint::Isend copies the data
// into the FIFO (so it completes at once); Irecv queues a receive that Wait/WaitAll match in order against the
// peer's FIFO. A size mismatch breaks the endpoint with an error naming both ranks and sizes; a wait longer
// than the fabric's timeout fails with DeadlineExceeded naming the peer, so a buggy algorithm fails instead of
// hanging. TestContext is an AlgorithmContext over one ThreadEndpoint (whatever the link) with a configurable
// topology, growing scratch, and RunSubCollective through SubgroupContext and the registry.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/algorithms/algorithm.h"
#include "runtime/transport/endpoint.h"

namespace hccltune::testing {

class ThreadFabric {
 public:
  ThreadFabric(int n, std::chrono::milliseconds timeout) : n_(n), timeout_(timeout), queues_(n * n) {}
  int size() const { return n_; }

 private:
  friend class ThreadEndpoint;
  const int n_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<std::vector<char>>> queues_;  // index src * n + dst
};

class ThreadEndpoint : public Endpoint {
 public:
  ThreadEndpoint(ThreadFabric& fabric, int rank) : fabric_(fabric), rank_(rank), pending_(fabric.size()) {}

  int rank() const override { return rank_; }
  int size() const override { return fabric_.size(); }
  OpHandle Isend(int peer, const void* data, size_t bytes) override;
  OpHandle Irecv(int peer, void* data, size_t bytes) override;
  absl::Status Wait(OpHandle op) override;
  absl::Status WaitAll() override;
  EndpointStats stats() const override { return stats_; }
  void ResetStats() override { stats_ = EndpointStats{}; }
  // Receives still unmatched (a finished collective must leave none).
  size_t Outstanding() const { return recvs_.size(); }

 private:
  struct RecvOp {
    int peer;
    void* data;
    size_t bytes;
  };
  // REQUIRES: fabric_.mu_ held. Matches queued receives against arrived messages.
  void ProgressLocked();
  absl::Status WaitUntil(const std::function<bool()>& done);

  ThreadFabric& fabric_;
  const int rank_;
  OpHandle next_ = 1;
  std::map<OpHandle, RecvOp> recvs_;           // incomplete receives
  std::vector<std::deque<OpHandle>> pending_;  // per peer, in posting order
  absl::Status broken_;
  EndpointStats stats_;
};

class TestContext : public AlgorithmContext {
 public:
  TestContext(Endpoint* ep, GroupTopology topo) : ep_(ep), topo_(std::move(topo)) {}
  absl::StatusOr<Endpoint*> GetEndpoint(const LinkSpec&) override { return ep_; }
  const GroupTopology& topology() const override { return topo_; }
  int rank() const override { return ep_->rank(); }
  void* Scratch(size_t bytes) override { return Grow(0, bytes); }
  absl::Status RunSubCollective(const CollectiveArgs& args, const Configuration& config,
                                absl::Span<const int> members) override;
  // What the communicator's selector chooses for a step (Selector::ChooseStep).
  absl::StatusOr<Configuration> ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes) override;
  int sub_collectives() const { return sub_calls_; }

 private:
  void* Grow(size_t depth, size_t bytes);
  Endpoint* ep_;
  GroupTopology topo_;
  std::vector<std::vector<char>> scratch_;  // one region per nesting depth
  size_t depth_ = 0;
  int sub_calls_ = 0;
};

// One node for every rank: {0, 0, ...}.
GroupTopology SingleNode(int n);
// node_of[r] given explicitly; num_nodes = max + 1.
GroupTopology Nodes(std::vector<int> node_of);

struct RankResult {
  absl::Status status;
  EndpointStats stats;
  int sub_collectives = 0;
};

// Runs fn(rank, ctx) on n threads over a fresh fabric; returns each rank's status and endpoint stats.
std::vector<RankResult> RunGroup(int n, const GroupTopology& topo,
                                 const std::function<absl::Status(int, AlgorithmContext&)>& fn,
                                 std::chrono::milliseconds timeout = std::chrono::milliseconds(10000));

}  // namespace hccltune::testing

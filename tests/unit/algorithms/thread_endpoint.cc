#include "thread_endpoint.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/algorithms/registry.h"
#include "runtime/algorithms/sub_endpoint.h"
#include "runtime/selector/selector.h"

namespace hccltune::testing {

OpHandle ThreadEndpoint::Isend(int peer, const void* data, size_t bytes) {
  ++stats_.sends;
  stats_.bytes_sent += bytes;
  std::vector<char> msg(bytes);
  if (bytes != 0) std::memcpy(msg.data(), data, bytes);
  {
    std::lock_guard<std::mutex> lock(fabric_.mu_);
    fabric_.queues_[static_cast<size_t>(rank_ * fabric_.n_ + peer)].push_back(std::move(msg));
  }
  fabric_.cv_.notify_all();
  return next_++;  // complete: the data was copied
}

OpHandle ThreadEndpoint::Irecv(int peer, void* data, size_t bytes) {
  ++stats_.recvs;
  stats_.bytes_received += bytes;
  const OpHandle h = next_++;
  recvs_[h] = RecvOp{peer, data, bytes};
  pending_[static_cast<size_t>(peer)].push_back(h);
  return h;
}

void ThreadEndpoint::ProgressLocked() {
  for (int peer = 0; peer < fabric_.n_ && broken_.ok(); ++peer) {
    auto& q = fabric_.queues_[static_cast<size_t>(peer * fabric_.n_ + rank_)];
    auto& pend = pending_[static_cast<size_t>(peer)];
    while (!pend.empty() && !q.empty()) {
      const OpHandle h = pend.front();
      RecvOp& op = recvs_.at(h);
      std::vector<char>& msg = q.front();
      if (msg.size() != op.bytes) {
        broken_ = absl::InternalError(absl::StrCat("size mismatch: rank ", peer, " sent ", msg.size(), " bytes, rank ",
                                                   rank_, " posted a receive of ", op.bytes, " bytes"));
        return;
      }
      if (op.bytes != 0) std::memcpy(op.data, msg.data(), op.bytes);
      q.pop_front();
      pend.pop_front();
      recvs_.erase(h);
    }
  }
}

absl::Status ThreadEndpoint::WaitUntil(const std::function<bool()>& done) {
  std::unique_lock<std::mutex> lock(fabric_.mu_);
  const auto deadline = std::chrono::steady_clock::now() + fabric_.timeout_;
  while (true) {
    ProgressLocked();
    if (!broken_.ok()) return broken_;
    if (done()) return absl::OkStatus();
    if (fabric_.cv_.wait_until(lock, deadline) == std::cv_status::timeout) {
      ProgressLocked();
      if (!broken_.ok()) return broken_;
      if (done()) return absl::OkStatus();
      int peer = -1;
      for (size_t p = 0; p < pending_.size(); ++p) {
        if (!pending_[p].empty()) peer = static_cast<int>(p);
      }
      broken_ = absl::DeadlineExceededError(absl::StrCat("rank ", rank_, " timed out waiting for rank ", peer));
      return broken_;
    }
  }
}

absl::Status ThreadEndpoint::Wait(OpHandle op) {
  return WaitUntil([&] { return recvs_.find(op) == recvs_.end(); });
}

absl::Status ThreadEndpoint::WaitAll() {
  return WaitUntil([&] { return recvs_.empty(); });
}

void* TestContext::Grow(size_t depth, size_t bytes) {
  if (scratch_.size() <= depth) scratch_.resize(depth + 1);
  std::vector<char>& s = scratch_[depth];
  if (s.size() < bytes) s.assign(bytes, static_cast<char>(0xA5));  // poison: contents are not preserved
  return s.empty() ? nullptr : s.data();
}

absl::Status TestContext::RunSubCollective(const CollectiveArgs& args, const Configuration& config,
                                           absl::Span<const int> members) {
  ++sub_calls_;
  const size_t depth = ++depth_;
  SubgroupContext sub(*this, members, [this, depth](size_t b) { return Grow(depth, b); });
  absl::Status s = registry::Run(args, config, sub);
  --depth_;
  return s;
}

absl::StatusOr<Configuration> TestContext::ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes) {
  return Selector::ChooseStep(c, bytes, group_size, nodes);
}

GroupTopology SingleNode(int n) {
  GroupTopology t;
  t.node_of.assign(static_cast<size_t>(n), 0);
  t.num_nodes = 1;
  return t;
}

GroupTopology Nodes(std::vector<int> node_of) {
  GroupTopology t;
  t.num_nodes = node_of.empty() ? 1 : *std::max_element(node_of.begin(), node_of.end()) + 1;
  t.node_of = std::move(node_of);
  return t;
}

std::vector<RankResult> RunGroup(int n, const GroupTopology& topo,
                                 const std::function<absl::Status(int, AlgorithmContext&)>& fn,
                                 std::chrono::milliseconds timeout) {
  ThreadFabric fabric(n, timeout);
  std::vector<RankResult> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadEndpoint ep(fabric, r);
      TestContext ctx(&ep, topo);
      RankResult& out = results[static_cast<size_t>(r)];
      out.status = fn(r, ctx);
      if (out.status.ok() && ep.Outstanding() != 0) {
        out.status = absl::InternalError(absl::StrCat("rank ", r, " left ", ep.Outstanding(), " receives posted"));
      }
      out.stats = ep.stats();
      out.sub_collectives = ctx.sub_collectives();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace hccltune::testing

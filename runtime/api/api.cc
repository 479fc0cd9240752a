// The public collective methods (argument packing) and the progress thread for non-blocking calls.
#include <exception>
#include <new>

#include "absl/strings/str_cat.h"
#include "runtime/api/communicator_impl.h"

namespace hccltune {
namespace {

class QueuedWork final : public Work {
 public:
  bool Test() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  absl::Status Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }
  void Complete(absl::Status s) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      status_ = std::move(s);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  absl::Status status_;
};

CollectiveArgs Args(Collective c, const void* send, void* recv, size_t count, DataType dtype,
                    ReduceOp op = ReduceOp::kSum, int root = 0) {
  CollectiveArgs a;
  a.collective = c;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  a.root = root;
  return a;
}

}  // namespace

std::shared_ptr<Work> CommImpl::Submit(std::function<absl::Status()> fn) {
  auto work = std::make_shared<QueuedWork>();
  {
    std::lock_guard<std::mutex> lock(q_mu_);
    if (!progress_.joinable()) progress_ = std::thread([this] { ProgressLoop(); });
    ++in_flight_;
    queue_.push_back([this, work, fn = std::move(fn)] {
      absl::Status s;
      try {  // on the progress thread an exception would end the process (std::terminate)
        s = fn();
      } catch (const std::bad_alloc&) {
        s = absl::ResourceExhaustedError("out of memory in a queued call");
      } catch (const std::exception& e) {
        s = absl::InternalError(absl::StrCat("internal error in a queued call: ", e.what()));
      }
      {
        std::lock_guard<std::mutex> done_lock(q_mu_);
        in_flight_.fetch_sub(1, std::memory_order_release);
      }
      work->Complete(std::move(s));
    });
  }
  q_cv_.notify_one();
  return work;
}

bool CommImpl::MustQueue() {
  // Nothing in flight (the common case): no lock, which costs a blocking small call two atomic operations.
  if (in_flight_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> lock(q_mu_);
  const bool on_progress = progress_.joinable() && std::this_thread::get_id() == progress_.get_id();
  return !on_progress && in_flight_ > 0;
}

void CommImpl::ProgressLoop() {
  while (true) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(q_mu_);
      q_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

absl::Status CommImpl::Allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                 const CallOptions& opt) {
  return Execute(Args(Collective::kAllreduce, send, recv, count, dtype, op), opt);
}
absl::Status CommImpl::Allgather(const void* send, void* recv, size_t count, DataType dtype, const CallOptions& opt) {
  return Execute(Args(Collective::kAllgather, send, recv, count, dtype), opt);
}
absl::Status CommImpl::Allgatherv(const void* send, void* recv, absl::Span<const size_t> counts,
                                  absl::Span<const size_t> displs, DataType dtype, const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kAllgatherv, send, recv,
                          static_cast<size_t>(rank_) < counts.size() ? counts[static_cast<size_t>(rank_)] : 0, dtype);
  a.counts = counts;
  a.displs = displs;
  return Execute(a, opt);
}
absl::Status CommImpl::Reducescatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                     const CallOptions& opt) {
  return Execute(Args(Collective::kReducescatter, send, recv, count, dtype, op), opt);
}
absl::Status CommImpl::Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                 const CallOptions& opt) {
  return Execute(Args(Collective::kBroadcast, send, recv, count, dtype, ReduceOp::kSum, root), opt);
}
absl::Status CommImpl::Reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root,
                              const CallOptions& opt) {
  return Execute(Args(Collective::kReduce, send, recv, count, dtype, op, root), opt);
}
absl::Status CommImpl::Gather(const void* send, void* recv, size_t count, DataType dtype, int root,
                              const CallOptions& opt) {
  return Execute(Args(Collective::kGather, send, recv, count, dtype, ReduceOp::kSum, root), opt);
}
absl::Status CommImpl::Scatter(const void* send, void* recv, size_t count, DataType dtype, int root,
                               const CallOptions& opt) {
  return Execute(Args(Collective::kScatter, send, recv, count, dtype, ReduceOp::kSum, root), opt);
}
absl::Status CommImpl::Alltoall(const void* send, void* recv, size_t count, DataType dtype, const CallOptions& opt) {
  return Execute(Args(Collective::kAlltoall, send, recv, count, dtype), opt);
}
absl::Status CommImpl::Alltoallv(const void* send, absl::Span<const size_t> send_counts,
                                 absl::Span<const size_t> send_displs, void* recv, absl::Span<const size_t> recv_counts,
                                 absl::Span<const size_t> recv_displs, DataType dtype, const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kAlltoallv, send, recv, 0, dtype);
  a.send_counts = send_counts;
  a.send_displs = send_displs;
  a.recv_counts = recv_counts;
  a.recv_displs = recv_displs;
  return Execute(a, opt);
}
absl::Status CommImpl::Barrier(const CallOptions& opt) {
  return Execute(Args(Collective::kBarrier, nullptr, nullptr, 0, DataType::kUint8), opt);
}

absl::Status CommImpl::RefuseCall(Collective c, absl::string_view why) {
  if (c == Collective::kSendRecv) {
    return absl::InvalidArgumentError(absl::StrCat("RefuseCall on rank ", rank_,
                                                   ": point-to-point has no operation "
                                                   "number to refuse (",
                                                   why, ")"));
  }
  if (MustQueue()) return Submit([this, c, w = std::string(why)] { return RefuseCall(c, w); })->Wait();
  std::lock_guard<std::mutex> lock(exec_mu_);
  if (!broken_.ok()) return broken_;
  return Refuse(Args(c, nullptr, nullptr, 0, DataType::kUint8), absl::InvalidArgumentError(why), false);
}
absl::Status CommImpl::Send(const void* data, size_t count, DataType dtype, int peer) {
  return PointToPoint(true, const_cast<void*>(data), count, dtype, peer);
}
absl::Status CommImpl::Recv(void* data, size_t count, DataType dtype, int peer) {
  return PointToPoint(false, data, count, dtype, peer);
}

std::shared_ptr<Work> CommImpl::Iallreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                           const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kAllreduce, send, recv, count, dtype, op);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Iallgather(const void* send, void* recv, size_t count, DataType dtype,
                                           const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kAllgather, send, recv, count, dtype);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Ireducescatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                               const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kReducescatter, send, recv, count, dtype, op);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Ibroadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                           const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kBroadcast, send, recv, count, dtype, ReduceOp::kSum, root);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Ireduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                        int root, const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kReduce, send, recv, count, dtype, op, root);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Ialltoall(const void* send, void* recv, size_t count, DataType dtype,
                                          const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kAlltoall, send, recv, count, dtype);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Ibarrier(const CallOptions& opt) {
  CollectiveArgs a = Args(Collective::kBarrier, nullptr, nullptr, 0, DataType::kUint8);
  return Submit([this, a, opt] { return Execute(a, opt); });
}
std::shared_ptr<Work> CommImpl::Enqueue(std::function<absl::Status(Communicator&)> call) {
  return Submit([this, call = std::move(call)] { return call(*this); });
}

}  // namespace hccltune

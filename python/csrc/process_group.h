// ProcessGroupHcclTune — torch.distributed's c10d::ProcessGroup over hccltune::Communicator.
//
// Every operation validates its arguments on the calling thread (bad input raises there, as gloo does), then
// runs on the communicator's progress thread in issue order (Communicator::Enqueue) and completes a
// c10::ivalue::Future with the op's output tensors; DDP's reducer chains on that future. Futures are completed
// by the group's CompletionQueue (completion.h), in issue order but never on the progress thread, so a `then`
// callback may issue another operation on the group and wait for it (PowerSGD's comm hook does). Non-contiguous
// tensors are staged through contiguous copies; dtypes the runtime has no type for (bool, int16, complex, …)
// travel as bytes where no reduction is involved (bool reductions map onto uint8 min/max). Send/recv match by
// (peer, tag) like gloo's (a receive may also take any source) and run off the collective progress thread, over
// per-pair communicators (p2p.h).
//
// Thread-safety: operations may be issued from any thread; they run in issue order.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "python/csrc/completion.h"
#include "python/csrc/p2p.h"
#include "runtime/api/communicator.h"

namespace hccltune::torch_backend {

inline constexpr const char* kBackendName = "hccltune";

// The execution timeout (s) a process-group timeout stands for: rounded up to whole seconds and clamped to
// HCCL_EXEC_TIMEOUT's range (kMinExecTimeoutS..kMaxExecTimeoutS), so torch's "forever" (timedelta(days=36500))
// means the longest timeout the runtime takes, the same on every rank.
int ExecTimeoutSeconds(std::chrono::milliseconds timeout);

class ProcessGroupHcclTune final : public c10d::ProcessGroup {
 public:
  // Creates the communicator through `store` (torch's, already prefixed per group). `timeout` becomes the
  // execution timeout unless HCCL_EXEC_TIMEOUT is set. Throws c10::Error with the runtime's message on failure.
  static c10::intrusive_ptr<ProcessGroupHcclTune> Create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                         int size, std::chrono::milliseconds timeout);

  // `p2p` carries send/recv (may be null: send/recv then fail with an error saying so).
  ProcessGroupHcclTune(int rank, int size, std::unique_ptr<Communicator> comm, std::unique_ptr<P2pEngine> p2p);
  ~ProcessGroupHcclTune() override;

  const std::string getBackendName() const override { return kBackendName; }
  Communicator& communicator() { return *comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  // The work's sourceRank() is the sender's rank once it completed.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seq_.load(); }

 private:
  // Queues `body` on the progress thread; the returned work's future holds `outputs` once body succeeded.
  c10::intrusive_ptr<c10d::Work> Run(c10d::OpType type, std::vector<at::Tensor> outputs,
                                     std::function<absl::Status(Communicator&)> body, int source_rank = -1);

  // Point-to-point work: its future completes from the engine's threads.
  c10::intrusive_ptr<c10d::Work> RunP2p(c10d::OpType type, std::vector<at::Tensor> outputs,
                                        std::function<void(P2pEngine::Done)> post, int source_rank);

  // recv and recvAnysource (src = P2pEngine::kAnySource).
  c10::intrusive_ptr<c10d::Work> PostRecv(c10d::OpType type, std::vector<at::Tensor>& tensors, int src, int tag);

  std::unique_ptr<CompletionQueue> completions_;  // destroyed after comm_ and p2p_, which post to it
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<P2pEngine> p2p_;  // destroyed before comm_
  std::atomic<uint64_t> seq_{0};
};

}  // namespace hccltune::torch_backend

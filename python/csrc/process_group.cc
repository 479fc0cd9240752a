#include "python/csrc/process_group.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/ivalue.h>
#include <Python.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "python/csrc/layout.h"
#include "python/csrc/sparse.h"
#include "python/csrc/store_adapter.h"
#include "runtime/common/config.h"
#include "runtime/tuning_client/tuning_client.h"

namespace hccltune::torch_backend {
namespace {

using c10d::OpType;

// How a tensor travels: the runtime's dtype and how many wire elements one tensor element is (1, or the
// element size when an unsupported dtype travels as bytes).
struct Wire {
  DataType dtype;
  size_t per_elem;
};

std::optional<DataType> RuntimeType(at::ScalarType s) {
  switch (s) {
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUint8;
    case at::kBool: return DataType::kUint8;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBfloat16;
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    default: return std::nullopt;
  }
}

Wire WireOf(const at::Tensor& t) {
  if (auto d = RuntimeType(t.scalar_type())) return {*d, 1};
  return {DataType::kUint8, static_cast<size_t>(t.element_size())};
}

size_t Count(const at::Tensor& t, const Wire& w) { return static_cast<size_t>(t.numel()) * w.per_elem; }

bool IsFloating(at::ScalarType s) {
  return s == at::kHalf || s == at::kBFloat16 || s == at::kFloat || s == at::kDouble;
}

// The runtime dtype and op of a reduction; raises for pairs that have none.
std::pair<DataType, ReduceOp> ReduceTypes(const at::Tensor& t, const c10d::ReduceOp& rop, const char* what) {
  const at::ScalarType s = t.scalar_type();
  const auto dtype = RuntimeType(s);
  TORCH_CHECK(dtype.has_value(), "hccltune: ", what, " cannot reduce dtype ", s,
              " (reductions take int8, uint8, bool, int32, int64, float16, bfloat16, float32, float64)");
  const auto op = static_cast<c10d::ReduceOp::RedOpType>(rop);
  if (s == at::kBool) {
    switch (op) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX:
      case c10d::ReduceOp::BOR: return {DataType::kUint8, ReduceOp::kMax};
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN:
      case c10d::ReduceOp::BAND: return {DataType::kUint8, ReduceOp::kMin};
      case c10d::ReduceOp::BXOR: return {DataType::kUint8, ReduceOp::kBxor};
      default: TORCH_CHECK(false, "hccltune: ", what, ": ReduceOp ", static_cast<int>(op), " does not apply to bool");
    }
  }
  const bool floating = IsFloating(s);
  switch (op) {
    case c10d::ReduceOp::SUM: return {*dtype, ReduceOp::kSum};
    case c10d::ReduceOp::PRODUCT: return {*dtype, ReduceOp::kProd};
    case c10d::ReduceOp::MIN: return {*dtype, ReduceOp::kMin};
    case c10d::ReduceOp::MAX: return {*dtype, ReduceOp::kMax};
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(floating, "hccltune: ", what, ": ReduceOp.AVG needs a floating-point tensor, got ", s);
      return {*dtype, ReduceOp::kAvg};
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(!floating, "hccltune: ", what, ": bitwise ReduceOps need an integer or bool tensor, got ", s);
      return {*dtype, op == c10d::ReduceOp::BAND  ? ReduceOp::kBand
                      : op == c10d::ReduceOp::BOR ? ReduceOp::kBor
                                                  : ReduceOp::kBxor};
    default:
      TORCH_CHECK(false, "hccltune: ", what, ": ReduceOp ", static_cast<int>(op),
                  " is not supported (SUM, PRODUCT, MIN, MAX, AVG, BAND, BOR, BXOR are)");
  }
}

void CheckTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "hccltune: ", what, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "hccltune: ", what, ": only CPU tensors are supported, got ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "hccltune: ", what,
              ": only dense (strided) tensors are supported, got layout ", t.layout(),
              " (all_reduce with SUM also takes sparse COO tensors)");
}

// A tensor the operation writes: its elements must not share memory (one made by expand() has stride 0), or
// the result could not be stored — refused at the call rather than failing after the whole collective ran.
// `index` >= 0 names the tensor's position in its list.
void CheckOutput(const at::Tensor& t, const char* what, int64_t index = -1) {
  CheckTensor(t, what);
  TORCH_CHECK(at::has_internal_overlap(t) != at::MemOverlap::Yes, "hccltune: ", what, ": output tensor",
              (index >= 0 ? c10::str(" ", index) : std::string()), " (sizes ", t.sizes(), ", strides ", t.strides(),
              ") has elements that share memory (made by expand()?) and cannot hold the result; pass a tensor with "
              "distinct elements, e.g. .clone()");
}

void CheckSingle(const std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1, "hccltune: ", what, " takes exactly one tensor per process, got ", ts.size());
  CheckTensor(ts[0], what);
}

void CheckLike(const at::Tensor& t, const at::Tensor& ref, const char* what) {
  CheckTensor(t, what);
  TORCH_CHECK(t.scalar_type() == ref.scalar_type(), "hccltune: ", what, ": tensors differ in dtype (", t.scalar_type(),
              " vs ", ref.scalar_type(), ")");
  TORCH_CHECK(t.numel() == ref.numel(), "hccltune: ", what, ": tensors differ in size (", t.numel(), " vs ",
              ref.numel(), " elements)");
}

void CheckRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "hccltune: ", what, ": root rank ", root, " is out of range [0, ", size, ")");
}

// A contiguous tensor the runtime works on; Finish() copies it back into the user's tensor if it is a copy.
struct Staged {
  at::Tensor user;
  at::Tensor buf;
  void Finish() const {
    if (!buf.is_same(user)) user.copy_(buf);
  }
};
Staged Stage(const at::Tensor& t) { return {t, t.is_contiguous() ? t : t.contiguous()}; }

// Concatenates tensors (all of one dtype) into one flat contiguous tensor.
at::Tensor Flatten(const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> flat;
  flat.reserve(ts.size());
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive blocks of `flat` into `outs`.
void Unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  int64_t off = 0;
  for (const auto& o : outs) {
    o.copy_(flat.narrow(0, off, o.numel()).view(o.sizes()));
    off += o.numel();
  }
}

// Runs a collective's argument checks and its Run: when a check throws (TORCH_CHECK: dtype, shape, device, list
// sizes...), the communicator is told first (Communicator::RefuseCall, queued behind this group's earlier work),
// so the other ranks, which passed their checks and may already wait in the call, fail after one blocked slice
// naming this rank and the reason instead of waiting out HCCL_EXEC_TIMEOUT; then the error reaches the caller.
template <typename F>
c10::intrusive_ptr<c10d::Work> RefuseOnThrow(Communicator& comm, Collective c, F&& checks_and_run) {
  try {
    return checks_and_run();
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    comm.Enqueue([c, why](Communicator& q) {
      (void)q.RefuseCall(c, why);
      return absl::OkStatus();
    });
    throw;
  }
}

absl::Status Ok() { return absl::OkStatus(); }

class HcclTuneWork final : public c10d::Work {
 public:
  // `source_rank`: what sourceRank() returns; a receive from any source sets it when it completes.
  HcclTuneWork(int rank, OpType type, c10::intrusive_ptr<c10::ivalue::Future> future,
               std::shared_ptr<std::atomic<int>> source_rank)
      : c10d::Work(rank, type), future_(std::move(future)), source_rank_(std::move(source_rank)) {}

  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  int sourceRank() const override { return source_rank_->load(); }
  std::vector<at::Tensor> result() override {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return future_->value().toTensorVector();
  }
  void synchronize() override {}
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout == kNoTimeout) {
      future_->wait();
    } else {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!future_->completed()) {
        TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "hccltune: operation timed out after ",
                    timeout.count(), " ms");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
    return true;
  }
  void abort() override { TORCH_CHECK(false, "hccltune: abort() is not supported"); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<std::atomic<int>> source_rank_;
};

// Completes an operation's future (on the CompletionQueue's threads): its outputs, or the runtime's error.
void Settle(c10::ivalue::Future& future, const std::vector<at::Tensor>& outputs, OpType type, const absl::Status& s) {
  if (s.ok()) {
    future.markCompleted(c10::IValue(outputs));
  } else {
    future.setError(std::make_exception_ptr(
        std::runtime_error(absl::StrCat("hccltune: ", c10d::opTypeToString(type), " failed: ", s.message()))));
  }
}

}  // namespace

int ExecTimeoutSeconds(std::chrono::milliseconds timeout) {
  const int64_t ms = timeout.count();
  const int64_t s = ms / 1000 + (ms % 1000 > 0 ? 1 : 0);  // rounded up; no overflow near INT64_MAX
  return static_cast<int>(std::clamp<int64_t>(s, kMinExecTimeoutS, kMaxExecTimeoutS));
}

c10::intrusive_ptr<ProcessGroupHcclTune> ProcessGroupHcclTune::Create(const c10::intrusive_ptr<c10d::Store>& store,
                                                                      int rank, int size,
                                                                      std::chrono::milliseconds timeout) {
  auto env = Environment::Load();
  TORCH_CHECK(env.ok(), "hccltune: ", std::string(env.status().message()));
  // A timeout the script chose (anything but torch's 30-minute default) is the execution timeout; with torch's
  // default, HCCL_EXEC_TIMEOUT wins when set, else the 30 minutes apply.
  const bool chosen = timeout.count() > 0 && timeout != std::chrono::milliseconds(std::chrono::minutes(30));
  const bool env_set = env->exec_timeout_s != Environment{}.exec_timeout_s;
  if (chosen || (!env_set && timeout.count() > 0)) env->exec_timeout_s = ExecTimeoutSeconds(timeout);
  // Tuning is automatic: the daemon's table and live timings, with no change to the training script.
  InstallDaemonTuning();
  auto comm = Communicator::Create(rank, size, AdaptC10dStore(store), *env);
  TORCH_CHECK(comm.ok(), "hccltune: creating the communicator for rank ", rank, " of ", size,
              " failed: ", std::string(comm.status().message()));
  // Per-pair point-to-point communicators need no tuning table: they only carry send/recv.
  Environment p2p_env = *env;
  p2p_env.mode = TuneMode::kOff;
  // A pair connects when both ranks first reach a send/recv with each other; the later one may be busy for as
  // long as any operation may wait, so connecting waits up to the execution timeout too (as a recv would).
  p2p_env.connect_timeout_s = std::max(p2p_env.connect_timeout_s, p2p_env.exec_timeout_s);
  // The engine enforces the group's timeout per operation; the pairs' transport waits must not time out on
  // their own, because a reader waits for whatever its peer sends next, for as long as the pair is idle.
  const std::chrono::milliseconds op_timeout(int64_t{env->exec_timeout_s} * 1000);
  p2p_env.exec_timeout_s = kMaxExecTimeoutS;  // the longest HCCL_EXEC_TIMEOUT accepts
  auto p2p = std::make_unique<P2pEngine>(rank, size, store, std::move(p2p_env), op_timeout);
  return c10::make_intrusive<ProcessGroupHcclTune>(rank, size, std::move(*comm), std::move(p2p));
}

ProcessGroupHcclTune::ProcessGroupHcclTune(int rank, int size, std::unique_ptr<Communicator> comm,
                                           std::unique_ptr<P2pEngine> p2p)
    : c10d::ProcessGroup(rank, size),
      completions_(std::make_unique<CompletionQueue>()),
      comm_(std::move(comm)),
      p2p_(std::move(p2p)) {
  init();
}

ProcessGroupHcclTune::~ProcessGroupHcclTune() {
  // The engine and the communicator own threads that may drop the last reference to a tensor that has a Python
  // object (an operation's completion callback), which takes the GIL. Joining them while this thread holds the
  // GIL deadlocks — torch's test_send_recv_with_tag hung so under load, the main thread in ~P2pEngine's join and
  // the engine's thread in THPVariable_subclass_dealloc — so the GIL is let go for the joins.
  PyThreadState* saved = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  p2p_.reset();  // before comm_
  comm_.reset();
  completions_.reset();  // last (both post to it); drains with the GIL released, since callbacks need it
  if (saved != nullptr) PyEval_RestoreThread(saved);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::RunP2p(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                            std::function<void(P2pEngine::Done)> post,
                                                            int source_rank) {
  TORCH_CHECK(p2p_ != nullptr, "hccltune: ", c10d::opTypeToString(type), ": this process group has no point-to-point");
  auto future = completions_->NewFuture();
  auto source = std::make_shared<std::atomic<int>>(source_rank);
  auto work = c10::make_intrusive<HcclTuneWork>(rank_, type, future, source);
  post([future, outputs = std::move(outputs), type, source, done = completions_->poster()](absl::Status s,
                                                                                           int from) mutable {
    if (from >= 0) source->store(from);  // before completion: a waiter reads it right after
    done([future = std::move(future), outputs = std::move(outputs), type, s = std::move(s)] {
      Settle(*future, outputs, type, s);
    });
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::Run(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                         std::function<absl::Status(Communicator&)> body,
                                                         int source_rank) {
  auto future = completions_->NewFuture();
  if (!c10d::isP2POp(type)) ++seq_;
  comm_->Enqueue([future, outputs = std::move(outputs), body = std::move(body), type,
                  done = completions_->poster()](Communicator& c) mutable {
    absl::Status s;
    try {
      s = body(c);
    } catch (const std::exception& e) {
      s = absl::InternalError(e.what());
    }
    // Completed by the queue, not here: the future's callbacks run where it completes, and one that waits on
    // a later operation of the group would block this thread, which has to run that operation.
    done([future = std::move(future), outputs = std::move(outputs), type, s] { Settle(*future, outputs, type, s); });
    return s;
  });
  return c10::make_intrusive<HcclTuneWork>(rank_, type, future, std::make_shared<std::atomic<int>>(source_rank));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kBroadcast, [&] {
    CheckSingle(tensors, "broadcast");
    CheckOutput(tensors[0], "broadcast");  // on the root too: it is copied back like the others'
    CheckRoot(opts.rootRank, size_, "broadcast");
    TORCH_CHECK(opts.rootTensor == 0, "hccltune: broadcast: rootTensor must be 0");
    Staged st = Stage(tensors[0]);
    const Wire w = WireOf(st.buf);
    const int root = static_cast<int>(opts.rootRank);
    return Run(OpType::BROADCAST, tensors, [st, w, root](Communicator& c) {
      void* p = st.buf.data_ptr();
      absl::Status s = c.Broadcast(p, p, Count(st.buf, w), w.dtype, root);
      if (s.ok()) st.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kAllreduce, [&] {
    TORCH_CHECK(tensors.size() == 1, "hccltune: allreduce takes exactly one tensor per process, got ", tensors.size());
    if (tensors[0].defined() && tensors[0].layout() == at::kSparse) {
      const at::Tensor& t = tensors[0];
      TORCH_CHECK(t.device().is_cpu(), "hccltune: allreduce: only CPU tensors are supported, got ", t.device());
      TORCH_CHECK(static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp) == c10d::ReduceOp::SUM,
                  "hccltune: allreduce of a sparse tensor supports ReduceOp.SUM only (as gloo), got ReduceOp ",
                  static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp)));
      const at::Tensor in = t.coalesce();
      return Run(OpType::ALLREDUCE, tensors,
                 [in, out = t](Communicator& c) mutable { return SparseAllreduceSum(c, in, out); });
    }
    CheckSingle(tensors, "allreduce");
    CheckOutput(tensors[0], "allreduce");
    const auto [dtype, op] = ReduceTypes(tensors[0], opts.reduceOp, "allreduce");
    Staged st = Stage(tensors[0]);
    return Run(OpType::ALLREDUCE, tensors, [st, dtype = dtype, op = op](Communicator& c) {
      void* p = st.buf.data_ptr();
      absl::Status s = c.Allreduce(p, p, static_cast<size_t>(st.buf.numel()), dtype, op);
      if (s.ok()) st.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                         const c10d::AllreduceCoalescedOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kAllreduce, [&] {
    TORCH_CHECK(!tensors.empty(), "hccltune: allreduce_coalesced needs at least one tensor");
    for (size_t i = 0; i < tensors.size(); ++i) {
      const at::Tensor& t = tensors[i];
      CheckOutput(t, "allreduce_coalesced", static_cast<int64_t>(i));
      TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                  "hccltune: allreduce_coalesced: all tensors must have the same dtype");
    }
    const auto [dtype, op] = ReduceTypes(tensors[0], opts.reduceOp, "allreduce_coalesced");
    at::Tensor flat = Flatten(tensors);
    return Run(OpType::ALLREDUCE_COALESCED, tensors, [flat, outs = tensors, dtype = dtype, op = op](Communicator& c) {
      void* p = flat.data_ptr();
      absl::Status s = c.Allreduce(p, p, static_cast<size_t>(flat.numel()), dtype, op);
      if (s.ok()) Unflatten(flat, outs);
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kReduce, [&] {
    CheckSingle(tensors, "reduce");
    CheckRoot(opts.rootRank, size_, "reduce");
    TORCH_CHECK(opts.rootTensor == 0, "hccltune: reduce: rootTensor must be 0");
    const auto [dtype, op] = ReduceTypes(tensors[0], opts.reduceOp, "reduce");
    Staged st = Stage(tensors[0]);
    const int root = static_cast<int>(opts.rootRank);
    const bool is_root = root == rank_;
    if (is_root) CheckOutput(tensors[0], "reduce");  // only the root's tensor is written
    return Run(OpType::REDUCE, tensors, [st, dtype = dtype, op = op, root, is_root](Communicator& c) {
      void* p = st.buf.data_ptr();
      absl::Status s = c.Reduce(p, p, static_cast<size_t>(st.buf.numel()), dtype, op, root);
      if (s.ok() && is_root) st.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& /*opts*/) {
  return RefuseOnThrow(*comm_, Collective::kAllgather, [&] {
    CheckSingle(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1, "hccltune: allgather takes one output list per process, got ", outputs.size());
    TORCH_CHECK(outputs[0].size() == static_cast<size_t>(size_), "hccltune: allgather: the output list has ",
                outputs[0].size(), " tensors, the group has ", size_, " ranks");
    for (size_t i = 0; i < outputs[0].size(); ++i) {
      CheckLike(outputs[0][i], inputs[0], "allgather");
      CheckOutput(outputs[0][i], "allgather", static_cast<int64_t>(i));
    }
    const at::Tensor in = inputs[0].contiguous();
    const Wire w = WireOf(in);
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    return Run(OpType::ALLGATHER, outputs[0], [in, w, flat, outs = outputs[0]](Communicator& c) {
      absl::Status s = c.Allgather(in.data_ptr(), flat.data_ptr(), Count(in, w), w.dtype);
      if (s.ok()) Unflatten(flat, outs);
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::AllgatherOptions& /*opts*/) {
  return RefuseOnThrow(*comm_, Collective::kAllgather, [&] {
    CheckTensor(input, "_allgather_base");
    CheckOutput(output, "_allgather_base");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccltune: _allgather_base: output dtype ",
                output.scalar_type(), " differs from input dtype ", input.scalar_type());
    TORCH_CHECK(output.numel() == input.numel() * size_, "hccltune: _allgather_base: output has ", output.numel(),
                " elements, expected world size (", size_, ") x input (", input.numel(), ")");
    Staged out = Stage(output);
    const at::Tensor in = input.contiguous();
    const Wire w = WireOf(in);
    return Run(OpType::_ALLGATHER_BASE, {output}, [out, in, w](Communicator& c) {
      absl::Status s = c.Allgather(in.data_ptr(), out.buf.data_ptr(), Count(in, w), w.dtype);
      if (s.ok()) out.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                         std::vector<at::Tensor>& inputs,
                                                                         const c10d::AllgatherOptions& /*opts*/) {
  return RefuseOnThrow(*comm_, Collective::kAllgather, [&] {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(size_), "hccltune: allgather_coalesced: ", outputs.size(),
                " output lists, the group has ", size_, " ranks");
    int64_t block = 0;  // bytes this rank contributes
    for (const auto& t : inputs) {
      CheckTensor(t, "allgather_coalesced");
      block += t.numel() * t.element_size();
    }
    for (const auto& list : outputs) {
      TORCH_CHECK(list.size() == inputs.size(), "hccltune: allgather_coalesced: an output list has ", list.size(),
                  " tensors, the input list ", inputs.size());
      for (size_t i = 0; i < list.size(); ++i) {
        CheckLike(list[i], inputs[i], "allgather_coalesced");
        CheckOutput(list[i], "allgather_coalesced");
      }
    }
    at::Tensor send = at::empty({block}, at::kByte);
    int64_t off = 0;
    for (const auto& t : inputs) {
      const at::Tensor ct = t.contiguous();
      const auto bytes = static_cast<size_t>(ct.numel() * ct.element_size());
      if (bytes > 0) std::memcpy(static_cast<uint8_t*>(send.data_ptr()) + off, ct.data_ptr(), bytes);
      off += static_cast<int64_t>(bytes);
    }
    at::Tensor recv = at::empty({block * size_}, at::kByte);
    std::vector<at::Tensor> flat_outs;
    for (const auto& list : outputs) flat_outs.insert(flat_outs.end(), list.begin(), list.end());
    return Run(OpType::ALLGATHER_COALESCED, flat_outs, [send, recv, outs = outputs, block](Communicator& c) {
      absl::Status s = c.Allgather(send.data_ptr(), recv.data_ptr(), static_cast<size_t>(block), DataType::kUint8);
      if (!s.ok()) return s;
      auto* base = static_cast<uint8_t*>(recv.data_ptr());
      for (size_t r = 0; r < outs.size(); ++r) {
        int64_t o = static_cast<int64_t>(r) * block;
        for (const auto& t : outs[r]) {
          if (t.numel() > 0) t.copy_(at::from_blob(base + o, t.sizes(), t.options().device(at::kCPU)));
          o += t.numel() * t.element_size();
        }
      }
      return Ok();
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::GatherOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kGather, [&] {
    CheckSingle(inputs, "gather");
    CheckRoot(opts.rootRank, size_, "gather");
    const int root = static_cast<int>(opts.rootRank);
    const bool is_root = root == rank_;
    if (is_root) {
      TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                  "hccltune: gather: the root needs one output list of ", size_, " tensors");
      for (size_t i = 0; i < outputs[0].size(); ++i) {
        CheckLike(outputs[0][i], inputs[0], "gather");
        CheckOutput(outputs[0][i], "gather", static_cast<int64_t>(i));
      }
    } else {
      TORCH_CHECK(outputs.empty(), "hccltune: gather: only the root (rank ", root, ") takes an output list");
    }
    const at::Tensor in = inputs[0].contiguous();
    const Wire w = WireOf(in);
    at::Tensor flat = is_root ? at::empty({in.numel() * size_}, in.options()) : at::Tensor();
    std::vector<at::Tensor> outs = is_root ? outputs[0] : std::vector<at::Tensor>{};
    return Run(OpType::GATHER, outs, [in, w, flat, outs, root, is_root](Communicator& c) {
      absl::Status s = c.Gather(in.data_ptr(), is_root ? flat.data_ptr() : nullptr, Count(in, w), w.dtype, root);
      if (s.ok() && is_root) Unflatten(flat, outs);
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ScatterOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kScatter, [&] {
    CheckSingle(outputs, "scatter");
    CheckOutput(outputs[0], "scatter");
    CheckRoot(opts.rootRank, size_, "scatter");
    const int root = static_cast<int>(opts.rootRank);
    const bool is_root = root == rank_;
    if (is_root) {
      TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                  "hccltune: scatter: the root needs one input list of ", size_, " tensors");
      for (const auto& t : inputs[0]) CheckLike(t, outputs[0], "scatter");
    } else {
      TORCH_CHECK(inputs.empty(), "hccltune: scatter: only the root (rank ", root, ") takes an input list");
    }
    Staged out = Stage(outputs[0]);
    const Wire w = WireOf(out.buf);
    at::Tensor flat = is_root ? Flatten(inputs[0]) : at::Tensor();
    return Run(OpType::SCATTER, outputs, [out, w, flat, root, is_root](Communicator& c) {
      absl::Status s =
          c.Scatter(is_root ? flat.data_ptr() : nullptr, out.buf.data_ptr(), Count(out.buf, w), w.dtype, root);
      if (s.ok()) out.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                                    const c10d::ReduceScatterOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kReducescatter, [&] {
    CheckSingle(outputs, "reduce_scatter");
    CheckOutput(outputs[0], "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                "hccltune: reduce_scatter needs one input list of ", size_, " tensors");
    for (const auto& t : inputs[0]) CheckLike(t, outputs[0], "reduce_scatter");
    const auto [dtype, op] = ReduceTypes(outputs[0], opts.reduceOp, "reduce_scatter");
    Staged out = Stage(outputs[0]);
    at::Tensor flat = Flatten(inputs[0]);
    return Run(OpType::REDUCE_SCATTER, outputs, [out, flat, dtype = dtype, op = op](Communicator& c) {
      absl::Status s =
          c.Reducescatter(flat.data_ptr(), out.buf.data_ptr(), static_cast<size_t>(out.buf.numel()), dtype, op);
      if (s.ok()) out.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                          const c10d::ReduceScatterOptions& opts) {
  return RefuseOnThrow(*comm_, Collective::kReducescatter, [&] {
    CheckTensor(input, "_reduce_scatter_base");
    CheckOutput(output, "_reduce_scatter_base");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccltune: _reduce_scatter_base: dtypes differ");
    TORCH_CHECK(input.numel() == output.numel() * size_, "hccltune: _reduce_scatter_base: input has ", input.numel(),
                " elements, expected world size (", size_, ") x output (", output.numel(), ")");
    const auto [dtype, op] = ReduceTypes(output, opts.reduceOp, "_reduce_scatter_base");
    Staged out = Stage(output);
    const at::Tensor in = input.contiguous();
    return Run(OpType::_REDUCE_SCATTER_BASE, {output}, [out, in, dtype = dtype, op = op](Communicator& c) {
      absl::Status s =
          c.Reducescatter(in.data_ptr(), out.buf.data_ptr(), static_cast<size_t>(out.buf.numel()), dtype, op);
      if (s.ok()) out.Finish();
      return s;
    });
  });
}

namespace {

// Per-peer element counts of a dim-0 split (empty splits = equal parts), scaled to wire elements.
std::vector<size_t> SplitCounts(const at::Tensor& t, const std::vector<int64_t>& splits, int size, size_t per_elem,
                                const char* which) {
  std::vector<size_t> counts(static_cast<size_t>(size));
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "hccltune: all_to_all: ", which, " dim 0 (", rows,
                ") is not divisible by the world size (", size, ") and no split sizes were given");
    std::fill(counts.begin(), counts.end(), static_cast<size_t>(rows / size * row) * per_elem);
    return counts;
  }
  TORCH_CHECK(splits.size() == static_cast<size_t>(size), "hccltune: all_to_all: ", splits.size(), " ", which,
              " split sizes for ", size, " ranks");
  int64_t sum = 0;
  for (size_t i = 0; i < splits.size(); ++i) {
    TORCH_CHECK(splits[i] >= 0, "hccltune: all_to_all: negative ", which, " split size ", splits[i]);
    sum += splits[i];
    counts[i] = static_cast<size_t>(splits[i] * row) * per_elem;
  }
  TORCH_CHECK(sum == rows, "hccltune: all_to_all: ", which, " split sizes sum to ", sum, ", dim 0 is ", rows);
  return counts;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                   std::vector<int64_t>& output_splits,
                                                                   std::vector<int64_t>& input_splits,
                                                                   const c10d::AllToAllOptions& /*opts*/) {
  return RefuseOnThrow(*comm_, Collective::kAlltoallv, [&] {
    CheckTensor(input, "all_to_all_single");
    CheckOutput(output, "all_to_all_single");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "hccltune: all_to_all_single: dtypes differ");
    const at::Tensor in = input.contiguous();
    Staged out = Stage(output);
    const Wire w = WireOf(in);
    if (output_splits.empty() && input_splits.empty()) {
      TORCH_CHECK(in.numel() == out.buf.numel() && in.numel() % size_ == 0, "hccltune: all_to_all_single: input (",
                  in.numel(), ") and output (", out.buf.numel(), ") must have equal sizes divisible by the world size");
      return Run(OpType::ALLTOALL_BASE, {output}, [in, out, w, n = size_](Communicator& c) {
        absl::Status s = c.Alltoall(in.data_ptr(), out.buf.data_ptr(), Count(in, w) / static_cast<size_t>(n), w.dtype);
        if (s.ok()) out.Finish();
        return s;
      });
    }
    auto sc = SplitCounts(in, input_splits, size_, w.per_elem, "input");
    auto rc = SplitCounts(out.buf, output_splits, size_, w.per_elem, "output");
    auto sd = Displacements(sc), rd = Displacements(rc);
    return Run(OpType::ALLTOALL_BASE, {output}, [in, out, w, sc, sd, rc, rd](Communicator& c) {
      absl::Status s = c.Alltoallv(in.data_ptr(), sc, sd, out.buf.data_ptr(), rc, rd, w.dtype);
      if (s.ok()) out.Finish();
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::alltoall(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllToAllOptions& /*opts*/) {
  return RefuseOnThrow(*comm_, Collective::kAlltoallv, [&] {
    TORCH_CHECK(outputs.size() == static_cast<size_t>(size_) && inputs.size() == static_cast<size_t>(size_),
                "hccltune: all_to_all needs ", size_, " input and output tensors, got ", inputs.size(), " and ",
                outputs.size());
    for (const auto& t : inputs) CheckTensor(t, "all_to_all");
    for (size_t i = 0; i < outputs.size(); ++i) {
      CheckOutput(outputs[i], "all_to_all", static_cast<int64_t>(i));
      TORCH_CHECK(outputs[i].scalar_type() == inputs[0].scalar_type(), "hccltune: all_to_all: tensors differ in dtype");
    }
    for (const auto& t : inputs) {
      TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(), "hccltune: all_to_all: tensors differ in dtype");
    }
    const at::Tensor send = Flatten(inputs);
    const Wire w = WireOf(send);
    std::vector<size_t> sc, rc;
    int64_t total = 0;
    for (const auto& t : inputs) sc.push_back(static_cast<size_t>(t.numel()) * w.per_elem);
    for (const auto& t : outputs) {
      rc.push_back(static_cast<size_t>(t.numel()) * w.per_elem);
      total += t.numel();
    }
    auto sd = Displacements(sc), rd = Displacements(rc);
    at::Tensor recv = at::empty({total}, send.options());
    return Run(OpType::ALLTOALL, outputs, [send, recv, w, sc, sd, rc, rd, outs = outputs](Communicator& c) {
      absl::Status s = c.Alltoallv(send.data_ptr(), sc, sd, recv.data_ptr(), rc, rd, w.dtype);
      if (s.ok()) Unflatten(recv, outs);
      return s;
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  CheckSingle(tensors, "send");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "hccltune: send: invalid destination rank ", dst,
              " (the group has ranks 0..", size_ - 1, ", this is rank ", rank_, ")");
  const at::Tensor in = tensors[0].contiguous();
  const auto bytes = static_cast<size_t>(in.numel() * in.element_size());
  return RunP2p(
      OpType::SEND, tensors,
      [this, in, bytes, dst, tag](P2pEngine::Done done) {
        // The closure keeps the staged tensor alive until the engine is done with it.
        p2p_->PostSend(dst, tag, in.data_ptr(), bytes,
                       [in, done = std::move(done)](absl::Status s, int from) { done(s, from); });
      },
      -1);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  CheckSingle(tensors, "recv");
  CheckOutput(tensors[0], "recv");
  TORCH_CHECK(src >= 0 && src < size_ && src != rank_, "hccltune: recv: invalid source rank ", src,
              " (the group has ranks 0..", size_ - 1, ", this is rank ", rank_, ")");
  return PostRecv(OpType::RECV, tensors, src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  CheckSingle(tensors, "recv from any source");
  CheckOutput(tensors[0], "recv from any source");
  TORCH_CHECK(size_ > 1, "hccltune: recv from any source in a group of one rank would never complete");
  return PostRecv(OpType::RECVANYSOURCE, tensors, P2pEngine::kAnySource, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::PostRecv(c10d::OpType type, std::vector<at::Tensor>& tensors,
                                                              int src, int tag) {
  Staged out = Stage(tensors[0]);
  const auto bytes = static_cast<size_t>(out.buf.numel() * out.buf.element_size());
  return RunP2p(
      type, tensors,
      [this, out, bytes, src, tag](P2pEngine::Done done) {
        p2p_->PostRecv(src, tag, out.buf.data_ptr(), bytes, [out, done = std::move(done)](absl::Status s, int from) {
          if (s.ok()) out.Finish();
          done(s, from);
        });
      },
      src);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHcclTune::barrier(const c10d::BarrierOptions& /*opts*/) {
  return Run(OpType::BARRIER, {}, [](Communicator& c) { return c.Barrier(); });
}

}  // namespace hccltune::torch_backend

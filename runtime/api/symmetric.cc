// Communicator symmetric memory: AllocSymmetric / FreeSymmetric, and the choice of the `symmetric` allreduce
// for calls on such buffers (see communicator.h and runtime/transport/symmetric_region.h).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/api/communicator_impl.h"
#include "runtime/common/logging.h"

namespace hccltune {

absl::StatusOr<void*> CommImpl::AllocSymmetric(size_t bytes) {
  if (MustQueue()) {
    // Behind queued non-blocking work, like a blocking collective (the caller's program order).
    void* p = nullptr;
    absl::Status s = Submit([this, bytes, &p] {
                       absl::StatusOr<void*> r = AllocSymmetric(bytes);
                       if (r.ok()) p = *r;
                       return r.status();
                     })->Wait();
    if (!s.ok()) return s;
    return p;
  }
  if (topo_.num_nodes != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("AllocSymmetric needs every rank on one node; this communicator's ", size_, " ranks are on ",
                     topo_.num_nodes, " nodes"));
  }
  std::lock_guard<std::mutex> lock(exec_mu_);
  if (!broken_.ok()) return broken_;
  if (bytes > (size_t{1} << 48)) {
    return absl::InvalidArgumentError(absl::StrCat("AllocSymmetric: ", bytes, " bytes is not a plausible size"));
  }
  SymmetricAllocator* allocator = nullptr;
  for (const auto& d : devices_.devices()) {
    if (allocator == nullptr) allocator = d->symmetric();
  }
  if (allocator == nullptr) {
    return absl::UnimplementedError("AllocSymmetric: no transport of this build has symmetric memory");
  }
  auto m = allocator->AllocateSymmetric(symmetric_next_id_++, bytes,
                                        static_cast<size_t>(std::min<uint64_t>(env_.huge_pages_bytes, SIZE_MAX)));
  if (!m.ok()) return m.status();
  if (symmetric_config_.algorithm.empty()) {
    auto c = Configuration::Default("symmetric");
    if (!c.ok()) return c.status();
    symmetric_config_ = *c;
  }
  Log(LogLevel::kDebug, "rank ", rank_, ": symmetric allocation ", (*m)->id(), " of ", bytes, " bytes in ",
      (*m)->huge() ? "2 MiB huge pages" : "4 KiB pages");
  void* p = (*m)->base(rank_);
  symmetric_.push_back(*std::move(m));
  ForgetCalls();  // a remembered call's buffers may be symmetric now (ChooseSymmetric)
  return p;
}

absl::Status CommImpl::FreeSymmetric(void* p) {
  std::lock_guard<std::mutex> lock(exec_mu_);
  for (auto it = symmetric_.begin(); it != symmetric_.end(); ++it) {
    if ((*it)->base(rank_) == p) {
      symmetric_.erase(it);
      ForgetCalls();
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("FreeSymmetric on rank ", rank_, ": ",
                                                 absl::Hex(reinterpret_cast<uintptr_t>(p)),
                                                 " is not the start of a symmetric allocation"));
}

bool CommImpl::FindSymmetric(const void* p, size_t bytes, SymmetricBuffer* out) const {
  for (const auto& m : symmetric_) {
    const int64_t off = m->OffsetOf(p, bytes);
    if (off < 0) continue;
    *out = SymmetricBuffer{m->id(), static_cast<size_t>(off)};
    return true;
  }
  return false;
}

const std::vector<char*>* CommImpl::SymmetricBases(uint64_t id) const {
  for (const auto& m : symmetric_) {
    if (m->id() == id) return &m->bases();
  }
  return nullptr;
}

const Configuration* CommImpl::ChooseSymmetric(const CollectiveArgs& args, const CallOptions& opt) const {
  if (symmetric_.empty() || !IsAutoConfig(opt)) return nullptr;
  const uint64_t es = DataTypeSize(args.dtype);
  const uint64_t block = args.count * es, all = block * static_cast<uint64_t>(size_);
  uint64_t send = 0, recv = 0;  // the extents this rank's buffers must have in symmetric memory
  switch (args.collective) {
    case Collective::kAllreduce: send = recv = block; break;
    case Collective::kAllgather: send = block, recv = all; break;
    case Collective::kReducescatter: send = all, recv = block; break;
    case Collective::kBroadcast: recv = block; break;  // the root's send is copied into its recv first
    default: return nullptr;
  }
  const uint64_t call_bytes = send == all || recv == all ? all : block;  // docs/CONVENTIONS.md, Sizes
  if (block == 0 || call_bytes < SymmetricFromBytes(args.collective, size_)) return nullptr;
  SymmetricBuffer b;
  if (send > 0 && !FindSymmetric(args.send, send, &b)) return nullptr;
  if (!FindSymmetric(args.recv, recv, &b)) return nullptr;
  return &symmetric_config_;
}

}  // namespace hccltune

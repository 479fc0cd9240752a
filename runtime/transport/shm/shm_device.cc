#include "runtime/transport/shm/shm_device.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/host.h"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"
#include "runtime/transport/shm/cma_cost.h"
#include "runtime/transport/shm/shm_transport.h"
#include "runtime/transport/shm/symmetric_memory.h"

namespace hccltune::transport {
namespace {

class ShmDevice final : public Device, public SymmetricAllocator {
 public:
  explicit ShmDevice(const DeviceContext& ctx) : ctx_(ctx) {}

  LinkKind kind() const override { return LinkKind::kShm; }
  Scope scope() const override { return Scope::kNode; }
  // The CPUs this rank sees and the name its segment will have (Start creates it): a peer maps it once it is
  // there, without asking the store for it.
  std::string Block() const override {
    return nlohmann::json{{"cpus", HostCpus()}, {"segment", absl::StrCat("/", SegmentPrefix(), "-", ctx_.rank)}}.dump();
  }
  absl::Status Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) override;
  absl::Status CheckLink(const LinkSpec& link, bool intra_step) const override {
    (void)link;
    if (!intra_step && num_nodes_ > 1) {
      return absl::InvalidArgumentError(absl::StrCat("link=shm: the ranks are on ", num_nodes_,
                                                     " nodes and shared memory reaches one; use tcp or auto"));
    }
    return absl::OkStatus();
  }
  int Lanes(int channels) const override {
    (void)channels;
    return 1;
  }
  absl::StatusOr<std::vector<Pair*>> Connect(const std::vector<int>& group, const std::string& network, int lanes,
                                             absl::Duration call_limit) override;
  Doorbell* doorbell() override { return domain_ ? domain_->doorbell() : nullptr; }
  Mailbox* mailbox() override { return domain_ ? domain_->mailbox() : nullptr; }
  SymmetricAllocator* symmetric() override { return this; }
  absl::StatusOr<std::unique_ptr<SymmetricRegion>> AllocateSymmetric(uint64_t id, size_t bytes,
                                                                     size_t huge_from) override;

 private:
  // The single-copy options for `local` ranks on this node (HCCL_TUNE_SINGLE_COPY, or measured).
  ShmOptions SingleCopyOptions(int local) const;
  std::string SegmentPrefix() const { return absl::StrCat("hccltune-", ::getpid(), "-", absl::Hex(ctx_.tag)); }
  // Maps the other local ranks' segments (rank -> name, from their blocks) as each is ready, and logs the peers
  // without single copy.
  absl::Status MapPeers(const std::map<int, std::string>& names, absl::Time deadline);
  // Waits until every local peer has mapped this rank's segment (the count in its header), then unlinks it.
  absl::Status AwaitMapped(size_t local, absl::Time deadline);

  DeviceContext ctx_;
  int num_nodes_ = 1;
  std::unique_ptr<ShmDomain> domain_;
};

ShmOptions ShmDevice::SingleCopyOptions(int local) const {
  const Environment& env = ctx_.env;
  ShmOptions options;
  options.single_copy = env.single_copy;
  options.populate_rings = !Oversubscribed(local);
  if (env.single_copy_min_bytes > 0) {
    options.single_copy_min_bytes = static_cast<size_t>(std::min<uint64_t>(env.single_copy_min_bytes, SIZE_MAX));
    Log(LogLevel::kInfo, "rank ", ctx_.rank, ": single copy from ", options.single_copy_min_bytes,
        "-byte messages (HCCL_TUNE_SINGLE_COPY)");
  } else if (env.single_copy) {
    // Measured: what a process_vm_readv costs here against a memcpy decides from which message size single copy
    // pays (cma_cost.h). Ranks taking turns on the CPUs (oversubscribed) start higher: a reader's
    // process_vm_readv pins the sender's pages while the other readers do the same (one page-table lock), and
    // nothing runs alongside it (4 ranks on 2 cores, Intel VM: 8 KiB broadcast 4.8 us through the ring against
    // 6.0 single-copied).
    const double ratio = SingleCopyCostRatio();
    options.single_copy_min_bytes = SingleCopyMinBytes(ratio, Oversubscribed(local));
    Log(LogLevel::kInfo, "rank ", ctx_.rank, ": single copy from ", options.single_copy_min_bytes,
        "-byte messages (a 64 KiB process_vm_readv costs ",
        ratio > 0 ? absl::StrFormat("%.1f memcpys here", ratio) : std::string("unmeasured: refused"),
        "; HCCL_TUNE_SINGLE_COPY=<size> sets it)");
  }
  return options;
}

absl::Status ShmDevice::Start(const DeviceLayout& layout, const std::vector<std::string>& blocks) {
  num_nodes_ = layout.num_nodes;
  const std::vector<int> local = layout.LocalRanks(ctx_.rank);
  if (local.size() < 2) return absl::OkStatus();
  // HCCL_BUFFSIZE is shared by the inbound rings (common/host.h: at most 4 MiB each, 1 MiB when this
  // communicator's ranks on the node take turns on its CPUs), at the fewest CPUs any local rank sees.
  int cpus = HostCpus();
  std::map<int, std::string> names;
  for (int r : local) {
    auto j = nlohmann::json::parse(blocks[static_cast<size_t>(r)], nullptr, false);
    const int theirs = j.is_object() ? JsonOr(j, "cpus", 0) : 0;
    if (theirs > 0) cpus = std::min(cpus, theirs);
    if (r == ctx_.rank) continue;
    names[r] = j.is_object() ? JsonOr(j, "segment", "") : "";
    if (names[r].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shm: rank ", r, "'s address block names no segment: '", blocks[static_cast<size_t>(r)], "'"));
    }
  }
  const size_t ring = ShmRingBytes(ctx_.env.buffsize_bytes, static_cast<int>(local.size()), cpus);
  auto shm =
      ShmDomain::Create(ctx_.rank, local, ring, SegmentPrefix(), SingleCopyOptions(static_cast<int>(local.size())));
  if (!shm.ok()) return shm.status();
  domain_ = *std::move(shm);
  const absl::Time deadline = absl::Now() + absl::Seconds(ctx_.env.connect_timeout_s);
  if (absl::Status s = MapPeers(names, deadline); !s.ok()) return s;
  return AwaitMapped(local.size(), deadline);
}

absl::Status ShmDevice::MapPeers(const std::map<int, std::string>& names, absl::Time deadline) {
  // Each peer's segment is mapped once its owner finished it (MapPeer: Unavailable before), retried from /dev/shm
  // itself: no store request per peer (n - 1 gets per rank through the store's one server made this O(n^2)
  // requests per node).
  std::map<int, std::string> pending = names;
  absl::Duration pause = absl::Microseconds(50);
  for (int polls = 1;; ++polls) {
    for (auto it = pending.begin(); it != pending.end();) {
      absl::Status s = domain_->MapPeer(it->first, it->second);
      if (!s.ok() && !absl::IsUnavailable(s)) return s;
      it = s.ok() ? pending.erase(it) : std::next(it);
    }
    if (pending.empty()) break;
    if (polls % 64 == 0) {  // a rank that failed its setup says so (Create)
      if (absl::Status a = ctx_.probe(); !a.ok()) return a;
    }
    if (absl::Now() > deadline) {
      std::vector<int> missing;
      for (const auto& [r, unused] : pending) missing.push_back(r);
      return absl::DeadlineExceededError(absl::StrCat("rank ", ctx_.rank, ": the shared memory of local ranks ",
                                                      absl::StrJoin(missing, ", "), " never appeared within ",
                                                      ctx_.env.connect_timeout_s, " s (HCCL_CONNECT_TIMEOUT)"));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(2));
  }
  for (const auto& [r, unused] : names) {
    if (absl::Status cma = domain_->SingleCopyStatus(r); !cma.ok()) {
      Log(LogLevel::kInfo, "rank ", ctx_.rank, ": large messages from rank ", r,
          " stream through the shm ring (no single copy): ", cma.message());
    }
  }
  return absl::OkStatus();
}

absl::Status ShmDevice::AwaitMapped(size_t local, absl::Time deadline) {
  // Each peer counts itself in this rank's segment header once it mapped it: waiting reads local memory, not the
  // store (every local rank polling rank 0's store server made the wait O(n) requests per poll on the node).
  absl::Duration pause = absl::Microseconds(50);
  for (int polls = 0; domain_->MappedBy() + 1 < local;) {
    if (++polls % 64 == 0) {  // a rank that failed its setup says so (Create)
      if (absl::Status a = ctx_.probe(); !a.ok()) return a;
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("rank ", ctx_.rank, ": only ", domain_->MappedBy(), " of its ",
                                                      local - 1, " local peers mapped its shared memory"));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(2));
  }
  domain_->Unlink();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Pair*>> ShmDevice::Connect(const std::vector<int>& group, const std::string& network,
                                                      int lanes, absl::Duration call_limit) {
  (void)network, (void)lanes, (void)call_limit;
  std::vector<Pair*> pairs(static_cast<size_t>(ctx_.size), nullptr);
  for (int r : group) {
    if (r == ctx_.rank) continue;
    Pair* p = domain_ ? domain_->pair(r) : nullptr;
    if (p == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("link=shm: rank ", r, " is on another node than rank ", ctx_.rank, "; use tcp or auto"));
    }
    pairs[static_cast<size_t>(r)] = p;
  }
  return pairs;
}

absl::StatusOr<std::unique_ptr<SymmetricRegion>> ShmDevice::AllocateSymmetric(uint64_t id, size_t bytes,
                                                                              size_t huge_from) {
  auto m = SymmetricMemory::Create(*ctx_.store, "mem", id, ctx_.rank, ctx_.size, bytes, huge_from,
                                   absl::Seconds(ctx_.env.connect_timeout_s));
  if (!m.ok()) return m.status();
  return std::unique_ptr<SymmetricRegion>(*std::move(m));
}

}  // namespace

std::unique_ptr<Device> NewShmDevice(const DeviceContext& ctx) { return std::make_unique<ShmDevice>(ctx); }

}  // namespace hccltune::transport

#include "runtime/transport/shm/shm_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/host.h"
#include "runtime/common/logging.h"

namespace hccltune {
namespace {

constexpr uint64_t kSegmentMagic = 0x48434c5453484d35ull;  // "HCLTSHM5": Segment::mapped_by added
constexpr size_t kLine = 64;
// Bytes one TryWrite/TryRead moves at most. The reader sees the head advance piece by piece instead of after
// a multi-megabyte memcpy, so it copies or reduces while the writer is still writing (pipelining inside one
// message), and the bytes it touches are still in cache.
constexpr size_t kPiece = 64u << 10;

struct alignas(kLine) BellWord {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleeping{0};
  // Set at creation when the owner issues a membarrier before it sleeps (see Ring): wakers that are registered
  // for it may then skip their fence. Constant afterwards.
  std::atomic<uint32_t> asymmetric{0};
};

// Single-copy state of a ring, set by its reader (the segment's owner) at MapPeers.
enum : uint32_t { kCmaUnknown = 0, kCmaOk = 1, kCmaRefused = 2 };

struct alignas(kLine) RingControl {
  alignas(kLine) std::atomic<uint64_t> head{0};  // bytes written (producer)
  alignas(kLine) std::atomic<uint64_t> tail{0};  // bytes read (consumer)
  // Single copy: messages the consumer has read straight from the producer's memory, and whether it can.
  alignas(kLine) std::atomic<uint64_t> reads_done{0};
  std::atomic<uint32_t> reader_cma{kCmaUnknown};
  // In-place return (ReturnLink::BeginReturns): the consumer's position while it returns bytes instead of freeing them.
  // Written by the consumer and read by the producer as reads_done is (and never in the same call: reductions do
  // not use single copy), so it shares that line: a fifth line per ring made the 4-rank 8 B allreduce 1-2% slower
  // (the mailbox slots after the controls moved).
  std::atomic<uint64_t> returned{0};
  // Shared single copy (SingleCopyLink::RequestPeerWrite): the consumer's request for message `ticket`, as
  // ticket << 3 | HelpState; the front part's destination and size in the consumer's address space.
  alignas(kLine) std::atomic<uint64_t> help{0};
  uint64_t help_dst = 0;
  uint64_t help_bytes = 0;
};

// The state of a shared single copy's front part (RingControl::help, low bits).
static_assert(sizeof(RingControl) == 4 * kLine, "four lines: a fifth moves the mailbox slots");

enum HelpState : uint64_t { kHelpAsked = 1, kHelpWriting = 2, kHelpWritten = 3, kHelpReaderTook = 4, kHelpFailed = 5 };
constexpr uint64_t Help(uint64_t ticket, HelpState s) { return ticket << 3 | s; }

// Copies between this process's `local` and another process's `remote` with process_vm_readv or
// process_vm_writev (`move`); retries partial transfers. errno-style result: 0 or the error.
using RemoteMove = ssize_t (*)(pid_t, const iovec*, unsigned long, const iovec*, unsigned long, unsigned long);
int MoveRemote(RemoteMove move, int pid, uint8_t* local, uint64_t remote, size_t bytes) {
  while (bytes > 0) {
    iovec mine{local, bytes};
    iovec theirs{reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
    const ssize_t n = move(pid, &mine, 1, &theirs, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;
    local += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return 0;
}
int ReadRemote(int pid, uint64_t remote, void* dst, size_t bytes) {
  return MoveRemote(::process_vm_readv, pid, static_cast<uint8_t*>(dst), remote, bytes);
}
int WriteRemote(int pid, const void* src, uint64_t remote, size_t bytes) {
  // process_vm_writev only reads the local buffer.
  return MoveRemote(::process_vm_writev, pid, const_cast<uint8_t*>(static_cast<const uint8_t*>(src)), remote, bytes);
}

// Makes every page of [p, p + bytes) writable in this process's page tables without changing its contents
// (MADV_POPULATE_WRITE, Linux 5.14; else a zero written to each page, for memory nobody uses yet).
void PrefaultForWriting(void* p, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto* c = static_cast<volatile uint8_t*>(p);
  for (size_t off = 0; off < bytes; off += page) c[off] = 0;
}

// Maps the pages of [p, p + bytes) of a shared mapping now (their contents unchanged), for reading or writing, so
// the first calls do not take the faults. Best effort: without MADV_POPULATE_* (Linux < 5.14) the pages fault in
// on first use.
void PopulateShared(void* p, size_t bytes, bool write) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  (void)::madvise(reinterpret_cast<void*>(start), end - start, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

// Yama's ptrace_scope: -1 when Yama is absent.
int YamaScope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int v = -1;
  if (!(f >> v)) return -1;
  return v;
}

long Futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

// Whether this process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED (Linux 4.16; refused under some seccomp
// policies): a barrier another process issues then runs on the CPUs running this one too. Registered once.
bool MembarrierRegistered() {
  static const bool registered = [] {
    const long cmds = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0 &&
           (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0 &&
           ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0) == 0;
  }();
  return registered;
}

// A full barrier. ThreadSanitizer refuses atomic_thread_fence (-Werror=tsan); there a seq_cst read-modify-write
// of the bell's own flag (totally ordered with the sleeper's seq_cst store of it) does the same job.
inline void FullFence([[maybe_unused]] BellWord* bell) {
#if defined(__SANITIZE_THREAD__)
  (void)bell->sleeping.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// `registered`: MembarrierRegistered(), passed by callers that keep it (a function call per ring otherwise).
void Ring(BellWord* bell, bool registered = MembarrierRegistered()) {
  // Dekker with the sleeper's store of `sleeping` and its re-check in PrepareSleep: either the sleeper sees our
  // data on its re-check, or we see it sleeping and wake it. That needs a full barrier on each side between the
  // store and the load. Asymmetric: a sleeper that issues MEMBARRIER_CMD_GLOBAL_EXPEDITED after its store runs a
  // barrier on our CPU too (we are registered), so we only keep the compiler from reordering — the fence (a
  // locked instruction that also waits for the ring stores to drain) was 7% of a 4-rank 8 B allreduce, and a
  // sleeper is rare (after 50 us of spinning or 2 ms of yielding).
  if (registered && bell->asymmetric.load(std::memory_order_relaxed) != 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    FullFence(bell);
  }
  if (bell->sleeping.load(std::memory_order_relaxed) != 0) {
    bell->seq.fetch_add(1, std::memory_order_seq_cst);
    Futex(&bell->seq, FUTEX_WAKE, INT_MAX, nullptr);
  }
}

}  // namespace

struct ShmDomain::Segment {
  uint64_t magic;
  int32_t owner_rank;
  int32_t owner_pid;
  uint32_t num_local;
  uint64_t ring_bytes;
  uint64_t owner_addr;  // where the owner mapped this segment (peers probe single copy by reading it there)
  int32_t owner_cpu;    // the CPU the owner is bound to, -1 when not bound to a single one
  uint32_t owner_pos;   // the owner's local position: it has no inbound ring of its own
  uint32_t mapped_by;   // how many local peers have mapped this segment (atomic; the owner unlinks it at n - 1)
  BellWord bell;
  // followed by RingControl[num_local], then num_local - 1 rings of ring_bytes each (the inbound ring of every
  // other local rank, by local position), then the owner's two mailbox slots (runtime/transport/mailbox.h)
  RingControl* controls() { return reinterpret_cast<RingControl*>(reinterpret_cast<uint8_t*>(this) + Offset()); }
  // The ring the rank at local position `from` writes into. REQUIRES: from != owner_pos.
  uint8_t* ring(size_t from) { return rings() + (from < owner_pos ? from : from - 1) * ring_bytes; }
  uint8_t* mailbox() { return rings() + (num_local - 1) * ring_bytes; }
  uint8_t* rings() { return reinterpret_cast<uint8_t*>(this) + Offset() + num_local * sizeof(RingControl); }
  static size_t Offset() { return (sizeof(Segment) + kLine - 1) / kLine * kLine; }
  // A segment for `n` >= 1 local ranks: n - 1 rings (a 4-rank node with 4 MiB rings maps 12 MiB per rank, not 16:
  // what decides whether a container's 64 MiB /dev/shm holds four ranks).
  static size_t Bytes(size_t n, size_t ring) {
    return Offset() + n * sizeof(RingControl) + (n - 1) * ring + 2 * kMailboxSlotBytes;
  }
};

namespace {

class ShmDoorbell final : public Doorbell {
 public:
  explicit ShmDoorbell(BellWord* bell) : bell_(bell) {}
  uint32_t PrepareSleep() override {
    const uint32_t token = bell_->seq.load(std::memory_order_seq_cst);
    bell_->sleeping.store(1, std::memory_order_seq_cst);
    if (bell_->asymmetric.load(std::memory_order_relaxed) != 0) {
      // The wakers' half of the barrier (see Ring). Should it fail, wakers may have missed `sleeping`: do not
      // rely on a wake-up, re-check again after a short sleep slice instead.
      if (::syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0) != 0) short_sleep_ = true;
    }
    return token;
  }
  void Sleep(uint32_t token, int64_t timeout_us) override {
    if (short_sleep_) timeout_us = std::min<int64_t>(timeout_us, 100);
    short_sleep_ = false;
    timespec ts{static_cast<time_t>(timeout_us / 1000000), static_cast<long>((timeout_us % 1000000) * 1000)};
    if (bell_->seq.load(std::memory_order_seq_cst) == token) Futex(&bell_->seq, FUTEX_WAIT, token, &ts);
    bell_->sleeping.store(0, std::memory_order_relaxed);
  }
  void CancelSleep() override {
    bell_->sleeping.store(0, std::memory_order_relaxed);
    short_sleep_ = false;
  }

 private:
  BellWord* bell_;
  bool short_sleep_ = false;  // this sleep's barrier failed: wake up soon on our own
};

// Link to one local peer: we write into the ring in the peer's segment and read from the ring in ours.
class ShmPair final : public Pair, public RingReads, public SingleCopyLink, public ReturnLink {
 public:
  ShmPair(int peer, int peer_pid, RingControl* out_ctl, uint8_t* out_ring, RingControl* in_ctl, uint8_t* in_ring,
          size_t ring_bytes, BellWord* peer_bell, int host_ranks, size_t single_copy_min, size_t single_copy_max,
          bool same_cpu)
      : peer_(peer),
        host_ranks_(host_ranks),
        peer_pid_(peer_pid),
        out_ctl_(out_ctl),
        out_ring_(out_ring),
        in_ctl_(in_ctl),
        in_ring_(in_ring),
        cap_(ring_bytes),
        peer_bell_(peer_bell),
        single_copy_min_(single_copy_min),
        single_copy_max_(single_copy_max),
        same_cpu_(same_cpu),
        out_head_(out_ctl->head.load(std::memory_order_relaxed)),
        out_tail_seen_(out_ctl->tail.load(std::memory_order_acquire)) {}

  int lanes() const override { return 1; }
  int HostRanks() const override { return host_ranks_; }

  // The writer keeps its own head and the last tail it saw, and reads the consumer's tail line only when that
  // old tail leaves too little room: each read of it is a cache miss on a line the consumer's core owns (~150 ns
  // between this VM's CPUs, 79% of TryWrite's samples in a 4-rank 8 B allreduce), and not reading it lets the
  // consumer's tail stores stay in its own cache. The room seen is never more than the room there is.
  absl::StatusOr<size_t> TryWrite(int, const void* data, size_t bytes) override {
    const uint64_t head = out_head_;
    const size_t want = std::min(bytes, kPiece);
    if (Room(head) < want) {
      // Never backwards: after a return period this rank may know more is free than the reader published yet.
      out_tail_seen_ = std::max(out_tail_seen_, out_ctl_->tail.load(std::memory_order_acquire));
    }
    const size_t n = std::min(want, Room(head));
    if (n == 0) return size_t{0};
    const size_t at = static_cast<size_t>(head % cap_);
    const size_t first = std::min(n, cap_ - at);
    std::memcpy(out_ring_ + at, data, first);
    if (n > first) std::memcpy(out_ring_, static_cast<const uint8_t*>(data) + first, n - first);
    out_head_ = head + n;
    out_ctl_->head.store(out_head_, std::memory_order_release);
    return n;
  }

  absl::StatusOr<size_t> TryRead(int, void* data, size_t bytes) override {
    const uint64_t tail = ReadPos();
    const uint64_t head = in_ctl_->head.load(std::memory_order_acquire);
    const size_t n = std::min<size_t>(bytes, static_cast<size_t>(head - tail));
    if (n == 0) return size_t{0};
    const size_t at = static_cast<size_t>(tail % cap_);
    const size_t first = std::min(n, cap_ - at);
    std::memcpy(data, in_ring_ + at, first);
    if (n > first) std::memcpy(static_cast<uint8_t*>(data) + first, in_ring_, n - first);
    Advance(tail + n);
    return n;
  }

  bool Peek(int, const void** data, size_t* bytes) override {
    const uint64_t tail = ReadPos();
    const uint64_t head = in_ctl_->head.load(std::memory_order_acquire);
    const size_t n = static_cast<size_t>(head - tail);
    const size_t at = static_cast<size_t>(tail % cap_);
    *data = in_ring_ + at;
    *bytes = std::min(n, cap_ - at);
    return true;
  }

  void Consume(int, size_t bytes) override { Advance(ReadPos() + bytes); }

  // In-place return. Reader: its position moves privately and is published in `returned`; `tail` stays where
  // the period began (so the writer knows everything before it is consumed) until EndReturns frees it all.
  // Writer: what it has taken back is free; before the reader's tail reached the period's start (the reader
  // was still consuming earlier messages) the tail bounds the room as always.
  void BeginReturns() override {
    in_returning_ = true;
    in_pos_ = in_ctl_->tail.load(std::memory_order_relaxed);
    out_returning_ = true;
    out_start_ = out_back_ = out_head_;
  }
  void EndReturns() override {
    in_returning_ = false;
    in_ctl_->tail.store(in_pos_, std::memory_order_release);
    // Everything written in the period came back, so the reader has consumed it all (and what came before it),
    // though its tail may not say so until it ends its own period; the room (the period may span more than the
    // ring) counts from here. A period that wrote nothing proves nothing about earlier messages.
    out_returning_ = false;
    if (out_back_ > out_start_) out_tail_seen_ = std::max(out_tail_seen_, out_back_);
  }
  bool PeekReturned(const void** data, size_t* bytes) override {
    const uint64_t returned = out_ctl_->returned.load(std::memory_order_acquire);
    // Before the reader began this period `returned` still holds an older period's end (never ahead of ours).
    const size_t n = returned > out_back_ ? static_cast<size_t>(returned - out_back_) : 0;
    const size_t at = static_cast<size_t>(out_back_ % cap_);
    *data = out_ring_ + at;
    *bytes = std::min(n, cap_ - at);
    return true;
  }
  void TakeReturned(size_t bytes) override { out_back_ += bytes; }

  bool PeerCanReadMemory() const override { return out_ctl_->reader_cma.load(std::memory_order_acquire) == kCmaOk; }
  size_t SingleCopyMinBytes() const override { return single_copy_min_; }
  size_t SingleCopyMaxBytes() const override { return single_copy_max_; }

  absl::Status ReadPeerMemory(uint64_t remote, void* dst, size_t bytes) override {
    const int err = ReadRemote(peer_pid_, remote, dst, bytes);
    if (err == 0) return absl::OkStatus();
    const std::string what = absl::StrCat("single-copy read of ", bytes, " bytes from rank ", peer_, " (pid ",
                                          peer_pid_, "): ", std::strerror(err));
    if (err == ESRCH) return absl::UnavailableError(absl::StrCat(what, "; rank ", peer_, " exited or was killed"));
    if (err == EPERM) return absl::PermissionDeniedError(what);
    return absl::DataLossError(absl::StrCat(what, " (the sender published an address it does not own)"));
  }

  void AckPeerRead() override {
    in_ctl_->reads_done.store(in_ctl_->reads_done.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  uint64_t PeerReadsAcked() const override { return out_ctl_->reads_done.load(std::memory_order_acquire); }
  uint64_t TakeSingleCopyTicket() override { return ++single_posted_; }

  // Shared single copy. The request lives in the control block of the ring the writer writes into (in the
  // reader's segment): the reader stores it through in_ctl_, the writer finds it through out_ctl_.
  bool PeerCanWriteMemory() const override { return PeerCanReadMemory(); }
  bool SharesCpuWithPeer() const override { return same_cpu_; }
  uint64_t NextReadTicket() const override { return in_ctl_->reads_done.load(std::memory_order_relaxed) + 1; }
  void RequestPeerWrite(uint64_t ticket, void* dst, size_t bytes) override {
    in_ctl_->help_dst = reinterpret_cast<uintptr_t>(dst);
    in_ctl_->help_bytes = bytes;
    in_ctl_->help.store(Help(ticket, kHelpAsked), std::memory_order_release);
    Ring(peer_bell_);  // a writer asleep in its wait for the acknowledgement can take the front part
  }
  absl::StatusOr<bool> CompletePeerWrite(uint64_t ticket, uint64_t remote, void* dst, size_t bytes) override {
    uint64_t state = Help(ticket, kHelpAsked);
    if (in_ctl_->help.compare_exchange_strong(state, Help(ticket, kHelpReaderTook), std::memory_order_acq_rel) ||
        state == Help(ticket, kHelpFailed)) {
      if (absl::Status s = ReadPeerMemory(remote, dst, bytes); !s.ok()) return s;
      return true;
    }
    return state == Help(ticket, kHelpWritten);
  }
  bool ServePeerWrite(uint64_t ticket, const void* src) override {
    uint64_t state = Help(ticket, kHelpAsked);
    // Only a writer the kernel lets into the reader (this rank's own probe of it) takes the front part.
    if (in_ctl_->reader_cma.load(std::memory_order_acquire) != kCmaOk ||
        out_ctl_->help.load(std::memory_order_acquire) != state ||
        !out_ctl_->help.compare_exchange_strong(state, Help(ticket, kHelpWriting), std::memory_order_acq_rel)) {
      return false;
    }
    const int err = WriteRemote(peer_pid_, src, out_ctl_->help_dst, out_ctl_->help_bytes);
    // Failed (the reader died, or the kernel refused): the reader copies the front part itself.
    out_ctl_->help.store(Help(ticket, err == 0 ? kHelpWritten : kHelpFailed), std::memory_order_release);
    Ring(peer_bell_);
    return true;
  }

  void Notify() override { Ring(peer_bell_); }

  absl::Status CheckPeer() override {
    if (peer_pid_ <= 0 || peer_pid_ == self_pid_) return absl::OkStatus();
    const bool dead = ProcessGone(peer_pid_);
    if (dead) {
      return absl::UnavailableError(
          absl::StrCat("rank ", peer_, " (pid ", peer_pid_, ") exited or was killed; shm link to it is dead"));
    }
    return absl::OkStatus();
  }

  std::string Describe() const override { return "shm"; }
  // The ring's head: every byte written through it, headers included (single-copy payloads are not).
  uint64_t BytesSent() const override { return out_ctl_->head.load(std::memory_order_relaxed); }
  PairCapabilities capabilities() override { return {this, this, this}; }

 private:
  int peer_;
  int host_ranks_;
  int peer_pid_;
  int self_pid_ = static_cast<int>(::getpid());
  RingControl* out_ctl_;
  uint8_t* out_ring_;
  RingControl* in_ctl_;
  uint8_t* in_ring_;
  size_t cap_;
  BellWord* peer_bell_;
  size_t single_copy_min_;
  size_t single_copy_max_;
  bool same_cpu_;               // both bound to the same single CPU
  uint64_t single_posted_ = 0;  // single-copy messages posted to the peer (tickets)
  // Writer side (TryWrite): this rank is the only writer of out_ctl_->head, so its own copy is the value; the
  // consumer's tail as last read — never ahead of what the reader has consumed (after a return period it may be
  // ahead of the tail the reader published, see EndReturns).
  uint64_t out_head_ = 0;
  uint64_t out_tail_seen_ = 0;
  // In-place return (BeginReturns): the writer's period start and read-back position; the reader's position.
  bool out_returning_ = false, in_returning_ = false;
  uint64_t out_start_ = 0, out_back_ = 0, in_pos_ = 0;

  // Bytes the writer may write at `head`: up to the oldest byte not yet free — the reader's tail, or, returning
  // and with every earlier message consumed, the oldest byte not yet taken back.
  size_t Room(uint64_t head) const {
    const uint64_t freed = out_returning_ && out_tail_seen_ >= out_start_ ? out_back_ : out_tail_seen_;
    return cap_ - static_cast<size_t>(head - freed);
  }
  uint64_t ReadPos() const { return in_returning_ ? in_pos_ : in_ctl_->tail.load(std::memory_order_relaxed); }
  void Advance(uint64_t pos) {
    if (in_returning_) {
      in_pos_ = pos;
      in_ctl_->returned.store(pos, std::memory_order_release);
    } else {
      in_ctl_->tail.store(pos, std::memory_order_release);
    }
  }
};

// The domain's mailbox: every local rank's two slots, at the end of its segment (own or mapped).
class ShmMailbox final : public Mailbox {
 public:
  // `inbound`: this rank's rings from the other members (their counters); `bells`: the other members' doorbells.
  ShmMailbox(std::vector<uint8_t*> bases, std::vector<const RingControl*> inbound, std::vector<BellWord*> bells)
      : bases_(std::move(bases)), inbound_(std::move(inbound)), bells_(std::move(bells)) {}
  size_t SlotBytes() const override { return kMailboxSlotBytes; }
  uint8_t* Slot(int rank, uint64_t exchange) override {
    return bases_[static_cast<size_t>(rank)] + (exchange & 1) * kMailboxSlotBytes;
  }
  bool InboundPending() const override {
    for (const RingControl* c : inbound_) {
      if (c->head.load(std::memory_order_acquire) != c->tail.load(std::memory_order_relaxed)) return true;
    }
    return false;
  }
  void NotifyMembers() override {
    for (BellWord* b : bells_) Ring(b, registered_);
  }

 private:
  std::vector<uint8_t*> bases_;  // by rank; null for ranks on other nodes
  std::vector<const RingControl*> inbound_;
  std::vector<BellWord*> bells_;
  bool registered_ = MembarrierRegistered();
};

absl::Status Errno(absl::string_view what, const std::string& name) {
  return absl::InternalError(absl::StrCat("shm: ", what, " ", name, ": ", std::strerror(errno)));
}

// posix_fallocate's failure on a segment: no room in /dev/shm names the sizes and the two ways out.
absl::Status ShmSpaceError(int err, const std::string& name, size_t bytes, size_t local, size_t ring_bytes) {
  if (err != ENOSPC) {
    return absl::InternalError(
        absl::StrCat("shm: cannot reserve ", bytes, " bytes for segment ", name, ": ", std::strerror(err)));
  }
  std::string room;
  struct statvfs fs {};
  if (::statvfs("/dev/shm", &fs) == 0) {
    room =
        absl::StrCat(" (", fs.f_bavail * fs.f_frsize >> 20, " MiB free of ", fs.f_blocks * fs.f_frsize >> 20, " MiB)");
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("shm: /dev/shm", room, " has no room for this rank's ", bytes >> 20, " MiB segment ", name, ": ",
                   local, " ranks on this node each map ", local - 1, " rings of ", ring_bytes >> 10,
                   " KiB (HCCL_BUFFSIZE); lower HCCL_BUFFSIZE or give /dev/shm more room (a container: --shm-size)"));
}

}  // namespace

int RemoveOrphanedSegments(absl::Duration min_age, const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  const int dfd = ::dirfd(d);
  const absl::Time now = absl::Now();
  int removed = 0;
  constexpr absl::string_view kPrefix = "hccltune-";
  while (const dirent* e = ::readdir(d)) {
    const absl::string_view name(e->d_name);
    if (!absl::StartsWith(name, kPrefix)) continue;
    const absl::string_view rest = name.substr(kPrefix.size());
    int pid = 0;
    if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask about)
    struct stat st {};
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid() ||
        now - absl::FromUnixSeconds(st.st_mtime) < min_age) {
      continue;
    }
    if (::unlinkat(dfd, e->d_name, 0) == 0) {
      ++removed;
      Log(LogLevel::kInfo, "shm: removed ", dir, "/", name, ", left by process ", pid,
          " (no longer running) when it stopped during setup");
    }
  }
  ::closedir(d);
  return removed;
}

absl::StatusOr<std::unique_ptr<ShmDomain>> ShmDomain::Create(int rank, const std::vector<int>& local_ranks,
                                                             size_t ring_bytes, const std::string& name_prefix,
                                                             const ShmOptions& options) {
  std::unique_ptr<ShmDomain> d(new ShmDomain());
  d->options_ = options;
  if (!options.single_copy) {
    d->single_copy_off_ = "turned off (HCCL_TUNE_SINGLE_COPY=off)";
  } else {
    const int scope = YamaScope();
    if (scope >= 2) {
      d->single_copy_off_ = absl::StrCat("Yama ptrace_scope is ", scope, " (only an administrator may attach)");
    } else if (scope == 1) {
      // Scope 1 lets only ancestors attach unless the target declares a ptracer. If this fails, the peers'
      // probes are refused and say so; this rank may still read peers that did declare one.
      (void)::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    }
  }
  if (std::find(local_ranks.begin(), local_ranks.end(), rank) == local_ranks.end()) {
    return absl::InvalidArgumentError(absl::StrCat("shm: rank ", rank, " is not among its node's ranks"));
  }
  d->rank_ = rank;
  d->local_ranks_ = local_ranks;
  d->ring_bytes_ = std::max<size_t>(4096, ring_bytes / 4096 * 4096);
  d->name_ = absl::StrCat("/", name_prefix, "-", rank);
  // What ranks killed during an earlier setup on this node left in /dev/shm (an hour: far beyond any setup).
  RemoveOrphanedSegments(absl::Hours(1));
  d->map_bytes_ = Segment::Bytes(local_ranks.size(), d->ring_bytes_);
  int fd = ::shm_open(d->name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return Errno("cannot create segment", d->name_);
  if (::ftruncate(fd, static_cast<off_t>(d->map_bytes_)) != 0) {
    absl::Status s = Errno("cannot size segment", d->name_);
    ::close(fd);
    ::shm_unlink(d->name_.c_str());
    return s;
  }
  // tmpfs sizes a file without reserving its pages: when /dev/shm is too small, the first touch of a missing page
  // kills the process with SIGBUS. Reserve them now and report the shortage instead.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(d->map_bytes_)); err != 0) {
    ::close(fd);
    ::shm_unlink(d->name_.c_str());
    return ShmSpaceError(err, d->name_, d->map_bytes_, local_ranks.size(), d->ring_bytes_);
  }
  void* p = ::mmap(nullptr, d->map_bytes_, PROT_READ | PROT_WRITE,
                   MAP_SHARED | (options.populate_rings ? MAP_POPULATE : 0), fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    absl::Status s = Errno("cannot map segment", d->name_);
    ::shm_unlink(d->name_.c_str());
    return s;
  }
  auto* seg = static_cast<Segment*>(p);
  // Nothing is in it yet. The header, ring controls and mailbox always; the rings when they are populated.
  PrefaultForWriting(
      p, options.populate_rings ? d->map_bytes_ : Segment::Offset() + local_ranks.size() * sizeof(RingControl));
  seg->owner_rank = rank;
  seg->owner_pid = static_cast<int32_t>(::getpid());
  seg->num_local = static_cast<uint32_t>(local_ranks.size());
  seg->ring_bytes = d->ring_bytes_;
  seg->owner_addr = reinterpret_cast<uintptr_t>(p);
  seg->owner_cpu = BoundCpu();
  seg->owner_pos = static_cast<uint32_t>(std::find(local_ranks.begin(), local_ranks.end(), rank) - local_ranks.begin());
  new (&seg->bell) BellWord();
  seg->bell.asymmetric.store(MembarrierRegistered() ? 1 : 0, std::memory_order_relaxed);
  for (size_t i = 0; i < local_ranks.size(); ++i) new (&seg->controls()[i]) RingControl();
  // Bring the inbound rings into the caches once: the kernel clears fresh pages without leaving them there, and a
  // ring's first pass then misses on every line (a 2-rank 64 KiB allreduce: 12 us per call during the ring's
  // first pass, 9 with the rings warmed here, 8 in steady state). Restarting an empty ring at its start instead
  // (so small messages reuse a few lines) was slower in steady state: 12 us, each line then moves between the two
  // cores' caches on every message.
  if (options.populate_rings) {
    std::memset(seg->rings(), 0, (local_ranks.size() - 1) * d->ring_bytes_);
  } else {
    PopulateShared(seg->mailbox(), 2 * kMailboxSlotBytes, /*write=*/true);
  }
  std::atomic_ref<uint64_t>(seg->magic).store(kSegmentMagic, std::memory_order_release);
  d->own_ = seg;
  d->doorbell_ = std::make_unique<ShmDoorbell>(&seg->bell);
  return d;
}

ShmDomain::~ShmDomain() {
  pairs_.clear();
  for (auto& [r, seg] : peers_) ::munmap(seg, map_bytes_);
  if (own_ != nullptr) ::munmap(own_, map_bytes_);
  Unlink();
}

uint32_t ShmDomain::MappedBy() const {
  return own_ == nullptr ? 0 : std::atomic_ref<uint32_t>(own_->mapped_by).load(std::memory_order_acquire);
}

void ShmDomain::Unlink() {
  if (!unlinked_ && own_ != nullptr) {
    ::shm_unlink(name_.c_str());
    unlinked_ = true;
  }
}

absl::Status ShmDomain::MapPeers(const std::map<int, std::string>& names) {
  for (const auto& [peer, name] : names) {
    if (absl::Status s = MapPeer(peer, name); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<ShmDomain::Segment*> ShmDomain::OpenReady(int peer, const std::string& name) const {
  int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) return absl::UnavailableError(absl::StrCat("rank ", peer, " has not created ", name));
  if (fd < 0) return Errno(absl::StrCat("cannot open rank ", peer, "'s segment"), name);
  struct stat st {};
  const bool sized = ::fstat(fd, &st) == 0 && st.st_size > 0;
  if (sized && static_cast<size_t>(st.st_size) != map_bytes_) {
    ::close(fd);
    return LayoutMismatch(peer, name);
  }
  // Not MAP_POPULATE: of a peer's segment this rank touches the header, the ring controls, its own inbound ring
  // there and the mailbox, not the other n - 2 rings; populating them all made every rank map n - 1 whole
  // segments, O(n^2) page-table work per node at init (32 ranks with 1 MiB rings on 2 CPUs: seconds).
  void* p = sized ? ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (!sized) return absl::UnavailableError(absl::StrCat("rank ", peer, " has not sized ", name));
  if (p == MAP_FAILED) return Errno(absl::StrCat("cannot map rank ", peer, "'s segment"), name);
  auto* seg = static_cast<Segment*>(p);
  // The owner stores the magic last (Create): before it, the segment is still being set up.
  if (std::atomic_ref<uint64_t>(seg->magic).load(std::memory_order_acquire) != kSegmentMagic) {
    ::munmap(p, map_bytes_);
    return absl::UnavailableError(absl::StrCat("rank ", peer, " has not finished ", name));
  }
  if (seg->owner_rank != peer || seg->ring_bytes != ring_bytes_ || seg->num_local != local_ranks_.size()) {
    ::munmap(p, map_bytes_);
    return LayoutMismatch(peer, name);
  }
  return seg;
}

absl::Status ShmDomain::LayoutMismatch(int peer, const std::string& name) {
  return absl::FailedPreconditionError(
      absl::StrCat("shm: segment ", name, " of rank ", peer,
                   " does not match this rank's layout (different HCCL_BUFFSIZE or ranks per node on the two ranks?)"));
}

absl::Status ShmDomain::MapPeer(int peer, const std::string& name) {
  auto pos = [this](int r) {
    return static_cast<size_t>(std::find(local_ranks_.begin(), local_ranks_.end(), r) - local_ranks_.begin());
  };
  if (peer == rank_ || peers_.count(peer) != 0) return absl::OkStatus();
  auto ready = OpenReady(peer, name);
  if (!ready.ok()) return ready.status();
  Segment* seg = *ready;
  PopulateShared(seg, Segment::Offset() + local_ranks_.size() * sizeof(RingControl), /*write=*/true);
  peers_[peer] = seg;
  const size_t me = pos(rank_), them = pos(peer);
  // Write-fault the ring this rank writes into now, else each first write to one of its pages takes a minor
  // fault (even MAP_POPULATE maps a shared mapping's pages for reading only) — a 2-rank 64 KiB allreduce ran at 19 us
  // for its first ~64 calls (one pass through a 4 MiB ring) and 8 us after. The ring is empty, and only
  // this rank writes it.
  if (options_.populate_rings) PrefaultForWriting(seg->ring(me), ring_bytes_);
  PopulateShared(seg->mailbox(), 2 * kMailboxSlotBytes, /*write=*/false);
  std::atomic_ref<uint32_t>(seg->mapped_by).fetch_add(1, std::memory_order_acq_rel);
  pairs_[peer] = std::make_unique<ShmPair>(
      peer, seg->owner_pid, &seg->controls()[me], seg->ring(me), &own_->controls()[them], own_->ring(them), ring_bytes_,
      &seg->bell, static_cast<int>(local_ranks_.size()), options_.single_copy_min_bytes, options_.single_copy_max_bytes,
      seg->owner_cpu >= 0 && seg->owner_cpu == own_->owner_cpu);
  // Single copy: can this rank read the peer's memory? Read the peer's segment header at the peer's own
  // address and compare it with what the mapping shows (a pid from another namespace reads something else).
  absl::Status cma = absl::OkStatus();
  if (!single_copy_off_.empty()) {
    cma = absl::FailedPreconditionError(single_copy_off_);
  } else {
    uint64_t probe[2] = {0, 0};
    const int err = ReadRemote(seg->owner_pid, seg->owner_addr, probe, sizeof(probe));
    if (err != 0) {
      const int scope = YamaScope();
      cma = absl::PermissionDeniedError(absl::StrCat(
          "the kernel refused to let rank ", rank_, " read rank ", peer, "'s memory (pid ", seg->owner_pid,
          "): ", std::strerror(err), scope >= 1 ? absl::StrCat("; Yama ptrace_scope is ", scope) : std::string()));
    } else if (probe[0] != kSegmentMagic || static_cast<int32_t>(probe[1]) != peer) {
      cma = absl::FailedPreconditionError(absl::StrCat("pid ", seg->owner_pid, " of rank ", peer,
                                                       " is not the same process in this rank's pid namespace"));
    }
  }
  own_->controls()[them].reader_cma.store(cma.ok() ? kCmaOk : kCmaRefused, std::memory_order_release);
  single_copy_[peer] = cma;
  return absl::OkStatus();
}

absl::Status ShmDomain::SingleCopyStatus(int peer) const {
  auto it = single_copy_.find(peer);
  if (it == single_copy_.end()) return absl::NotFoundError(absl::StrCat("rank ", peer, " is not a mapped shm peer"));
  return it->second;
}

Pair* ShmDomain::pair(int peer) {
  auto it = pairs_.find(peer);
  return it == pairs_.end() ? nullptr : it->second.get();
}

Doorbell* ShmDomain::doorbell() { return doorbell_.get(); }

Mailbox* ShmDomain::mailbox() {
  if (mailbox_ == nullptr) {
    std::vector<uint8_t*> bases(static_cast<size_t>(*std::max_element(local_ranks_.begin(), local_ranks_.end())) + 1,
                                nullptr);
    std::vector<const RingControl*> inbound;
    std::vector<BellWord*> bells;
    for (int r : local_ranks_) {
      if (r == rank_) {
        bases[static_cast<size_t>(r)] = own_->mailbox();
      } else {
        auto it = peers_.find(r);
        if (it == peers_.end()) return nullptr;  // not mapped (yet)
        bases[static_cast<size_t>(r)] = it->second->mailbox();
        const auto at = std::find(local_ranks_.begin(), local_ranks_.end(), r) - local_ranks_.begin();
        inbound.push_back(&own_->controls()[at]);  // the ring r writes into (MapPeers: ShmPair's in_ctl_)
        bells.push_back(&it->second->bell);        // what ShmPair::Notify rings
      }
    }
    mailbox_ = std::make_unique<ShmMailbox>(std::move(bases), std::move(inbound), std::move(bells));
  }
  return mailbox_.get();
}

}  // namespace hccltune

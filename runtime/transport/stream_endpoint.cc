#include "runtime/transport/stream_endpoint.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/common/host.h"
#include "runtime/common/logging.h"
#include "runtime/common/stream_copy.h"
#include "runtime/transport/stream_endpoint_internal.h"

namespace hccltune {

using namespace stream_internal;  // NOLINT(build/namespaces): this class's own constants

namespace {

// Idle waiting (nothing moved): spin, then yield, then block. Times, not pass counts: a pass over many queues
// costs more than one over a few.
constexpr int64_t kSpinNs = 50'000;  // every rank may have a CPU (not bound): round trips are ~0.1-1 us
// While a single-copy send waits for its acknowledgement (the peer is copying the buffer right now), a rank
// that does not share its CPU with another rank spins this long before it sleeps: under load a futex wake-up
// waits for the CPU's other task (a compiler) to give it up. A 2-rank 2-8 MiB single-copy broadcast, whose root
// waits while the peer reads, lost 100-500 us to that wake-up with the 50 us spin. Only for these waits: spinning
// 2 ms on every wait made a 2-rank 16-32 MiB allreduce 1.3-2x slower under load (the spin spends the rank's
// share of the CPU that its reduction then lacks).
constexpr int64_t kAckSpinNs = 2'000'000;
constexpr int64_t kYieldNs = 200'000;  // then sched_yield until this much idle time, then the doorbell
// More shm ranks than CPUs (4 ranks on 2 cores): no spin at all — the peer may need this very CPU — and a long
// yield window before the futex: a wake-up costs tens of microseconds here (VM), and ranks that wake each other
// get pulled onto one CPU. Open MPI under oversubscription also yields and never sleeps. Against spin 1 us /
// yield 50 us, a 4-rank 8 B-4 KiB allreduce went from 13.5-30 to 11.6-21 us (6 interleaved runs, load 10) and,
// all four ranks on one CPU, from 19-40 to 16-27 us; sleeping at once took 190-290 us.
constexpr int64_t kOverSpinNs = 0;
constexpr int64_t kMinSpinNs = 1'000;  // the adaptive spin of a rank that does not share its CPU never goes below
constexpr int64_t kOverYieldNs = 2'000'000;
// More ranks than CPUs and only socket links (TCP; no shm pair to watch): no yield either — poll() at once. The
// kernel wakes a rank blocked in poll() as soon as its peer's bytes arrive (or its send buffer drains), with no
// doorbell for the peer to ring, while a yield under load hands the CPU to another program for its time slice.
// 4 ranks on 2 CPUs over tcp, halving_doubling, same load (~7.5): with the 2 ms yield window 64 KiB-1 MiB took
// 232, 290, 635, 7657, 8336 us; polling at once 315, 276, 514, 829, 1415 (hccl-tune bench --algo all --link tcp).
constexpr int64_t kPolledOverYieldNs = 0;

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
}  // namespace

StreamEndpoint::StreamEndpoint(int rank, std::vector<Pair*> pairs, Doorbell* doorbell, absl::Duration timeout)
    : rank_(rank), pairs_(std::move(pairs)), doorbell_(doorbell), timeout_(timeout) {
  for (const auto& p : pairs_) {
    if (p) max_lanes_ = std::max(max_lanes_, p->lanes());
  }
  queues_.resize(pairs_.size() * 2 * static_cast<size_t>(max_lanes_));
  send_seq_.assign(pairs_.size(), 0);
  used_.assign(pairs_.size(), 0);
  returning_.assign(pairs_.size(), 0);
  returns_.resize(pairs_.size());
  recv_seq_.assign(pairs_.size(), 0);
  caps_.resize(pairs_.size());
  for (size_t r = 0; r < pairs_.size(); ++r) {
    if (pairs_[r]) caps_[r] = pairs_[r]->capabilities();
  }
  for (const auto& p : pairs_) {
    if (p) NotePair(p);
  }
}

void StreamEndpoint::NotePair(Pair* pair) {
  std::vector<pollfd> probe;
  pair->AddPollFds(0, true, true, &probe);
  (probe.empty() ? any_unpolled_ : any_polled_) = true;
  const int cpus = HostCpus();
  static const bool bound = BoundToOneCpu();
  if (Oversubscribed(pair->HostRanks())) {
    if (!bound) {
      // Unbound, ranks that wait by yielding end up on one CPU and stay there:
      // small calls then cost 1.7-1.9x what they cost with the ranks spread. Binding is the launcher's choice.
      static std::once_flag hint;
      std::call_once(hint, [&] {
        Log(LogLevel::kInfo, "shm: ", pair->HostRanks(), " ranks share ", cpus,
            " CPUs and this rank is not bound to one: small collectives are faster with the ranks bound round-robin "
            "(hccl-tune bench does; e.g. taskset -c $((LOCAL_RANK % ",
            cpus, ")) for other launchers)");
      });
    }
    oversubscribed_ = true;
  }
  own_cpu_ = bound && !oversubscribed_;
}

StreamEndpoint::~StreamEndpoint() = default;

void StreamEndpoint::AttachPair(int peer, Pair* pair) {
  pairs_[static_cast<size_t>(peer)] = pair;
  caps_[static_cast<size_t>(peer)] = pair->capabilities();
  if (pair->lanes() > max_lanes_) {
    // Re-layout the (empty) queues for the wider lane count.
    max_lanes_ = pair->lanes();
    queues_.assign(pairs_.size() * 2 * static_cast<size_t>(max_lanes_), Queue{});
  }
  NotePair(pair);
}

StreamEndpoint::Queue& StreamEndpoint::QueueFor(int peer, bool send, int lane) {
  return queues_[(static_cast<size_t>(peer) * 2 + (send ? 1 : 0)) * static_cast<size_t>(max_lanes_) +
                 static_cast<size_t>(lane)];
}

OpHandle StreamEndpoint::Isend(int peer, const void* data, size_t bytes) { return PostSend(peer, data, bytes, 0); }

StreamEndpoint::Header StreamEndpoint::CallHeader(uint64_t bytes) const {
  return Header{kHeaderMagic,
                call_.sequence,
                bytes,
                call_.count,
                call_.root,
                static_cast<uint8_t>(call_.collective),
                static_cast<uint8_t>(call_.dtype),
                static_cast<uint8_t>(call_.op),
                0};
}

OpHandle StreamEndpoint::PostSend(int peer, const void* data, size_t bytes, uint64_t gate, bool returns,
                                  uint8_t* result) {
  Op op;
  op.gate = gate;
  op.peer = peer;
  op.send = true;
  op.data = const_cast<uint8_t*>(static_cast<const uint8_t*>(data));
  op.bytes = bytes;
  op.header = CallHeader(bytes);
  const uint64_t id = base_id_ + ops_.size();
  if (peer < 0 || peer >= size() || peer == rank_ || !pairs_[static_cast<size_t>(peer)]) {
    if (broken_.ok()) {
      broken_ = absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": send to invalid peer ", peer));
    }
    op.done = true;
    ops_.push_back(op);
    return id;
  }
  Pair& pair = *pairs_[static_cast<size_t>(peer)];
  if (call_.collective != Collective::kSendRecv) used_[static_cast<size_t>(peer)] = call_.sequence;
  if (!returns && returning_[static_cast<size_t>(peer)]) MixedWithReturns(peer, "send to");
  op.lane = static_cast<int>(send_seq_[static_cast<size_t>(peer)]++ % static_cast<uint64_t>(pair.lanes()));
  if (returns) {
    op.returns = true;
    op.result = result;
    op.header.flags = kFlagReturn;
  }
  // Single copy for large messages of non-reducing collectives, when the peer can read our memory.
  SingleCopyLink* single = caps_[static_cast<size_t>(peer)].single_copy;
  if (gate == 0 && !returns && single != nullptr && bytes >= single->SingleCopyMinBytes() &&
      bytes <= single->SingleCopyMaxBytes() && SingleCopyCollective(call_.collective) && single->PeerCanReadMemory()) {
    op.header.flags = kFlagSingleCopy;
    op.desc = SingleCopyDescriptor{reinterpret_cast<uintptr_t>(data), bytes};
    op.ticket = single->TakeSingleCopyTicket();
  }
  ops_.push_back(op);
  if (returns) {
    returns_[static_cast<size_t>(peer)].push_back(id);
    ++returns_pending_;
  }
  Queue& queue = QueueFor(peer, true, op.lane);
  queue.ops.push_back(id);
  ++pending_;
  ++stats_.sends;
  stats_.bytes_sent += bytes;
  if (queue.ops.size() == 1 && broken_.ok()) {
    // First in its queue: start it now (one non-blocking attempt: a small frame, the single-copy descriptor,
    // or the first ring piece), so the peer can start while this rank does local work before its Wait.
    Op& posted = ops_.back();
    bool moved = false;
    if (absl::Status st = ProgressSend(posted, &moved); !st.ok()) {
      broken_ = st;
      return id;
    }
    if (moved) pair.Notify();
    if (posted.done) {
      queue.ops.pop_back();
      --pending_;
    } else if (posted.written) {
      queue.ops.pop_back();  // in the ring: it completes when its result is back (CheckReturns)
    } else if (posted.ticket != 0 && posted.desc_done == sizeof(posted.desc)) {
      queue.ops.pop_back();
      AwaitAck(id);
    }
  }
  return id;
}

OpHandle StreamEndpoint::Irecv(int peer, void* data, size_t bytes) {
  Op op;
  op.peer = peer;
  op.send = false;
  op.data = static_cast<uint8_t*>(data);
  op.bytes = bytes;
  const uint64_t id = base_id_ + ops_.size();
  if (peer < 0 || peer >= size() || peer == rank_ || !pairs_[static_cast<size_t>(peer)]) {
    if (broken_.ok()) {
      broken_ = absl::InvalidArgumentError(absl::StrCat("rank ", rank_, ": receive from invalid peer ", peer));
    }
    op.done = true;
    ops_.push_back(op);
    return id;
  }
  if (call_.collective != Collective::kSendRecv) used_[static_cast<size_t>(peer)] = call_.sequence;
  if (!posting_return_ && returning_[static_cast<size_t>(peer)]) MixedWithReturns(peer, "receive from");
  op.lane = static_cast<int>(recv_seq_[static_cast<size_t>(peer)]++ %
                             static_cast<uint64_t>(pairs_[static_cast<size_t>(peer)]->lanes()));
  ops_.push_back(op);
  QueueFor(peer, false, op.lane).ops.push_back(id);
  ++pending_;
  ++stats_.recvs;
  stats_.bytes_received += bytes;
  return id;
}

bool StreamEndpoint::PeerPending(size_t peer) const {
  const size_t per_peer = 2 * static_cast<size_t>(max_lanes_);
  for (size_t q = peer * per_peer; q < (peer + 1) * per_peer; ++q) {
    if (!queues_[q].ops.empty()) return true;
  }
  for (uint64_t id : awaiting_ack_) {
    if (static_cast<size_t>(ops_[id - base_id_].peer) == peer) return true;
  }
  return !returns_[peer].empty();
}

bool StreamEndpoint::SendingTo(int peer) const {
  for (int lane = 0; lane < max_lanes_; ++lane) {
    if (!queues_[(static_cast<size_t>(peer) * 2 + 1) * static_cast<size_t>(max_lanes_) + static_cast<size_t>(lane)]
             .ops.empty()) {
      return true;
    }
  }
  for (uint64_t id : awaiting_ack_) {
    if (ops_[id - base_id_].peer == peer) return true;
  }
  return !returns_[static_cast<size_t>(peer)].empty();
}

void StreamEndpoint::AwaitAck(uint64_t id) { awaiting_ack_.push_back(id); }

void StreamEndpoint::CheckAcks(bool* moved) {
  size_t kept = 0;
  for (uint64_t id : awaiting_ack_) {
    Op& op = ops_[id - base_id_];
    // Shared single copy: write the front part if the reader asked and has not taken it itself.
    SingleCopyLink& single = *caps_[static_cast<size_t>(op.peer)].single_copy;  // a single-copy send's pair has it
    if (single.ServePeerWrite(op.ticket, op.data)) *moved = true;
    if (single.PeerReadsAcked() >= op.ticket) {
      op.done = true;  // the peer has read the buffer: it is the caller's again
      --pending_;
      *moved = true;
    } else {
      awaiting_ack_[kept++] = id;
    }
  }
  awaiting_ack_.resize(kept);
}

OpHandle StreamEndpoint::IrecvReduce(int peer, void* out, const void* local, size_t bytes, const Combiner* combiner) {
  const OpHandle id = Irecv(peer, out, bytes);
  Op* op = Find(id);
  if (op != nullptr && !op->done) {
    op->local = static_cast<const uint8_t*>(local);
    op->combiner = combiner;
  }
  return id;
}

bool StreamEndpoint::SupportsReturn(int peer) const {
  return HasPair(peer) && caps_[static_cast<size_t>(peer)].returns != nullptr &&
         pairs_[static_cast<size_t>(peer)]->lanes() == 1;
}

void StreamEndpoint::MixedWithReturns(int peer, const char* what) {
  if (broken_.ok()) {
    broken_ = absl::InternalError(absl::StrCat("rank ", rank_, ": a plain ", what, " rank ", peer,
                                               " was posted while in-place return operations with it are pending"));
  }
}

bool StreamEndpoint::EnterReturns(int peer) {
  if (!HasPair(peer)) return true;  // posting reports the invalid peer
  if (returning_[static_cast<size_t>(peer)]) return true;
  absl::Status refused;
  if (!SupportsReturn(peer)) {
    refused = absl::InternalError(absl::StrCat("rank ", rank_, ": the link to rank ", peer, " (",
                                               pairs_[static_cast<size_t>(peer)]->Describe(),
                                               ") cannot return messages in place"));
  } else if (PeerPending(static_cast<size_t>(peer))) {
    refused = absl::InternalError(absl::StrCat("rank ", rank_, ": an in-place return operation with rank ", peer,
                                               " was posted while other operations with it are pending"));
  }
  if (!refused.ok()) {
    if (broken_.ok()) broken_ = refused;
    return false;  // the pair stays as it is; every wait returns the error
  }
  caps_[static_cast<size_t>(peer)].returns->BeginReturns();
  returning_[static_cast<size_t>(peer)] = 1;
  ++returning_peers_;
  return true;
}

void StreamEndpoint::LeaveReturns() {
  for (size_t peer = 0; peer < returning_.size(); ++peer) {
    if (!returning_[peer] || PeerPending(peer)) continue;
    caps_[peer].returns->EndReturns();
    returning_[peer] = 0;
    --returning_peers_;
  }
}

OpHandle StreamEndpoint::IsendReturn(int peer, const void* data, size_t bytes, void* result) {
  if (!EnterReturns(peer)) return Refused();
  return PostSend(peer, data, bytes, 0, true, static_cast<uint8_t*>(result));
}

OpHandle StreamEndpoint::Refused() {
  Op op;
  op.done = true;
  const uint64_t id = base_id_ + ops_.size();
  ops_.push_back(op);
  return id;
}

OpHandle StreamEndpoint::IrecvReduceReturn(int peer, void* out, const void* local, size_t bytes,
                                           const Combiner* combiner) {
  if (!EnterReturns(peer)) return Refused();
  posting_return_ = true;
  const OpHandle id = IrecvReduce(peer, out, local, bytes, combiner);
  posting_return_ = false;
  Op* op = Find(id);
  if (op != nullptr && !op->done) op->returns = true;
  return id;
}

OpHandle StreamEndpoint::IrecvForward(int from, void* out, const void* local, size_t bytes, const Combiner* combiner,
                                      int to, OpHandle* send) {
  const OpHandle recv = combiner != nullptr ? IrecvReduce(from, out, local, bytes, combiner) : Irecv(from, out, bytes);
  *send = PostSend(to, out, bytes, recv + 1);
  Op* r = Find(recv);
  if (r != nullptr && !r->done) r->forward = *send + 1;
  return recv;
}

StreamEndpoint::Op* StreamEndpoint::Find(uint64_t id) {
  if (id < base_id_ || id >= base_id_ + ops_.size()) return nullptr;
  return &ops_[id - base_id_];
}

void StreamEndpoint::Retire() {
  while (!ops_.empty() && ops_.front().done) {
    ops_.pop_front();
    ++base_id_;
  }
}

absl::Status StreamEndpoint::ProgressSend(Op& op, bool* moved) {
  Pair& pair = *pairs_[static_cast<size_t>(op.peer)];
  size_t limit = op.bytes;
  if (op.gate != 0) {
    // Receive-and-forward: only what the feeding receive has stored (all of it once that is retired).
    const Op* feed = Find(op.gate - 1);
    if (feed != nullptr && !feed->done) limit = feed->payload_done;
  }
  if (op.header_done == 0 && op.bytes <= kSmallPayload && limit == op.bytes && !(op.header.flags & kFlagSingleCopy)) {
    // Small message: header, payload and padding in one write (one head update for the reader to see).
    uint8_t frame[sizeof(Header) + kSmallPayload + kStreamAlign];
    std::memcpy(frame, &op.header, sizeof(Header));
    if (op.bytes > 0) std::memcpy(frame + sizeof(Header), op.data, op.bytes);
    std::memset(frame + sizeof(Header) + op.bytes, 0, PadFor(op.bytes));
    const size_t total = sizeof(Header) + op.bytes + PadFor(op.bytes);
    auto n = pair.TryWrite(op.lane, frame, total);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    *moved = true;
    op.header_done = std::min(*n, sizeof(Header));
    op.payload_done = std::min(*n - op.header_done, op.bytes);
    op.pad_done = *n - op.header_done - op.payload_done;
    if (*n == total) {
      (op.returns ? op.written : op.done) = true;
      return absl::OkStatus();
    }
  }
  while (op.header_done < sizeof(Header)) {
    auto n = pair.TryWrite(op.lane, reinterpret_cast<const uint8_t*>(&op.header) + op.header_done,
                           sizeof(Header) - op.header_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    op.header_done += *n;
    *moved = true;
  }
  if (op.header.flags & kFlagSingleCopy) {
    while (op.desc_done < sizeof(op.desc)) {
      auto n = pair.TryWrite(op.lane, reinterpret_cast<const uint8_t*>(&op.desc) + op.desc_done,
                             sizeof(op.desc) - op.desc_done);
      if (!n.ok()) return n.status();
      if (*n == 0) return absl::OkStatus();
      op.desc_done += *n;
      *moved = true;
    }
    // The buffer stays the caller's until the peer has read it.
    if (caps_[static_cast<size_t>(op.peer)].single_copy->PeerReadsAcked() >= op.ticket) {
      op.done = true;
      *moved = true;  // progress: a waiter about to sleep must re-check instead
    }
    return absl::OkStatus();
  }
  if (op.gate != 0) {
    const Op* feed = Find(op.gate - 1);
    limit = feed != nullptr && !feed->done ? feed->payload_done : op.bytes;
  }
  while (op.payload_done < limit) {
    auto n = pair.TryWrite(op.lane, op.data + op.payload_done, limit - op.payload_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    op.payload_done += *n;
    *moved = true;
  }
  if (op.payload_done < op.bytes) return absl::OkStatus();
  static constexpr uint8_t kZeros[kStreamAlign] = {};
  while (op.pad_done < PadFor(op.bytes)) {
    auto n = pair.TryWrite(op.lane, kZeros, PadFor(op.bytes) - op.pad_done);
    if (!n.ok()) return n.status();
    if (*n == 0) return absl::OkStatus();
    op.pad_done += *n;
    *moved = true;
  }
  (op.returns ? op.written : op.done) = true;  // a return send completes when its result is back
  return absl::OkStatus();
}

bool StreamEndpoint::CanWriteNow(const Op& op) {
  if (op.gate == 0 || op.header_done < sizeof(Header)) return true;
  const Op* feed = Find(op.gate - 1);
  return feed == nullptr || feed->done || op.payload_done < feed->payload_done;
}

absl::Status StreamEndpoint::Progress(bool* moved) {
  // Sends first: a header that leaves early lets the peer detect a mismatched call by itself even when this
  // rank stops at a mismatch found in one of its receives.
  // queues_ is [peer][dir][lane]: walked by index, no division per queue (a 64-bit divide per queue per pass
  // was 4% of a 4-rank 8 B allreduce).
  const size_t lanes = static_cast<size_t>(max_lanes_);
  const size_t peers = pairs_.size();
  for (size_t pass = 0; pass < 2; ++pass)
    for (size_t q0 = (pass == 0 ? lanes : 0); q0 < peers * 2 * lanes; q0 += 2 * lanes)
      for (size_t q = q0; q < q0 + lanes; ++q) {
        Queue& queue = queues_[q];
        while (!queue.ops.empty()) {
          const uint64_t id = queue.ops.front();
          Op* op = Find(id);
          bool op_moved = false;
          absl::Status s = op->send ? ProgressSend(*op, &op_moved) : ProgressRecv(*op, &op_moved);
          if (op_moved) {
            *moved = true;
            pairs_[static_cast<size_t>(op->peer)]->Notify();
          }
          if (!s.ok()) return s;
          if (!op->done) {
            if (op->written) {
              queue.ops.pop_front();  // all in the ring: it completes when its result is back (CheckReturns)
              continue;
            }
            if (op->send && op->ticket != 0 && op->desc_done == sizeof(op->desc)) {
              queue.ops.pop_front();  // descriptor sent: the next message may follow while the peer reads
              AwaitAck(id);
              continue;
            }
            break;
          }
          queue.ops.pop_front();
          --pending_;
        }
      }
  if (!awaiting_ack_.empty()) CheckAcks(moved);
  if (returns_pending_ > 0) CheckReturns(moved);
  return absl::OkStatus();
}

absl::Status StreamEndpoint::Fail(absl::Status s) {
  if (broken_.ok()) broken_ = s;
  return broken_;
}

absl::Status StreamEndpoint::Block(absl::Duration slice, absl::FunctionRef<absl::Status(bool*, bool*)> step) {
  const int64_t us = absl::ToInt64Microseconds(slice);
  if (!any_polled_ && doorbell_ != nullptr) {
    const uint32_t token = doorbell_->PrepareSleep();
    bool moved = false, done = false;
    absl::Status s = step(&moved, &done);  // re-check after announcing the sleep (no lost wake-up)
    if (!s.ok() || moved || done) {
      doorbell_->CancelSleep();
      return s;
    }
    doorbell_->Sleep(token, us);
    return absl::OkStatus();
  }
  std::vector<pollfd> fds;
  for (size_t q = 0; q < queues_.size(); ++q) {
    if (queues_[q].ops.empty()) continue;
    const size_t peer = q / (2 * static_cast<size_t>(max_lanes_));
    const bool send = (q / static_cast<size_t>(max_lanes_)) % 2 == 1;
    const int lane = static_cast<int>(q % static_cast<size_t>(max_lanes_));
    // A forward send that has sent all its receive has stored waits for that receive, not for the socket (which
    // is writable: polling it would return at once, and the rank would spin on poll instead of sleeping).
    if (send && !CanWriteNow(*Find(queues_[q].ops.front()))) continue;
    pairs_[peer]->AddPollFds(lane, !send, send, &fds);
  }
  // A mix of shm and TCP links: poll briefly, shm progress is picked up on the next pass.
  const bool mixed = any_unpolled_ && doorbell_ != nullptr;
  const int timeout_ms = mixed ? 1 : static_cast<int>(std::max<int64_t>(1, us / 1000));
  ::poll(fds.data(), fds.size(), timeout_ms);
  return absl::OkStatus();
}

absl::Status StreamEndpoint::Wait(OpHandle handle) {
  if (!broken_.ok()) return broken_;
  Op* op = Find(handle);
  if (op == nullptr || op->done) {
    Retire();
    if (returning_peers_ > 0) LeaveReturns();
    return absl::OkStatus();
  }
  auto step = [&](bool* moved, bool* done) {
    absl::Status s = Progress(moved);
    *done = Find(handle)->done;
    return s;
  };
  // Liveness: a peer process that died leaves its shm ring silent forever. Only peers this rank still waits
  // on matter, and what a peer wrote before it exited is still delivered (the ring lives in the reader's
  // segment): drain first, fail only if something for that peer is still pending.
  auto check = [&]() -> absl::Status {
    for (size_t peer = 0; peer < pairs_.size(); ++peer) {
      if (pairs_[peer] == nullptr || !PeerPending(peer)) continue;
      if (absl::Status s = pairs_[peer]->CheckPeer(); !s.ok()) {
        bool drained = false;
        if (absl::Status p = Progress(&drained); !p.ok()) return p;
        if (PeerPending(peer)) return s;
      }
    }
    return absl::OkStatus();
  };
  auto expired = [&](absl::Duration blocked) {
    const Op* o = Find(handle);
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", rank_, ": ", CollectiveName(call_.collective), " (operation ", call_.sequence,
                     ") waited ", absl::FormatDuration(blocked), " for rank ", o->peer, " to ",
                     o->written ? "return its result for"
                     : o->send  ? "take"
                                : "send",
                     " a ", o->bytes, "-byte message over ", pairs_[static_cast<size_t>(o->peer)]->Describe(),
                     " (HCCL_EXEC_TIMEOUT); is rank ", o->peer, " stuck, or did it call something else?"));
  };
  absl::Status s = WaitLoop(step, check, expired);
  if (!s.ok()) return Fail(s);
  Retire();
  if (returning_peers_ > 0) LeaveReturns();
  return absl::OkStatus();
}

absl::Status StreamEndpoint::WaitLoop(absl::FunctionRef<absl::Status(bool*, bool*)> step,
                                      absl::FunctionRef<absl::Status()> check,
                                      absl::FunctionRef<absl::Status(absl::Duration)> expired, bool wait_first) {
  absl::Duration blocked;    // time asleep in Block() during this wait (against the exec timeout)
  absl::Duration unchecked;  // of which since the last liveness / abort check
  // Adaptive: spinning pays only while the peer runs on another CPU. A wait that had to yield before its
  // data came means the peer was waiting for a CPU (e.g. sharing ours right after fork, before the
  // scheduler spreads the ranks): halve the spin. A wait that completed while spinning keeps it. Every 64th
  // wait probes with the full spin, so a rank that got its own CPU back returns to spinning.
  const int64_t max_spin = oversubscribed_ ? kOverSpinNs : kSpinNs;
  // A rank bound to a CPU of its own never yields: the only tasks a yield could run are other programs' (a
  // compiler on a loaded machine keeps the CPU for a whole time slice, milliseconds); it spins, then sleeps
  // on the doorbell, from which a wake-up preempts them at once. Nor does it shorten its spin: a wait that
  // outlasts the spin means another program ran, not that a peer rank needed this CPU.
  const bool probe = (++waits_ & 63) == 0;
  const int64_t spin_ns = probe || own_cpu_ ? max_spin : std::min(max_spin, spin_ns_);
  const int64_t yield_ns = own_cpu_           ? spin_ns
                           : !oversubscribed_ ? kYieldNs
                           : any_unpolled_    ? kOverYieldNs
                                              : kPolledOverYieldNs;
  int idle = 0;
  int64_t idle_since = 0;
  int64_t idle_ns = 0;
  bool long_spin = false;  // spun past spin_ns for an acknowledgement: says nothing about sharing the CPU
  bool skip_step = wait_first;
  while (true) {
    bool moved = false;
    bool done = false;
    if (skip_step) {
      skip_step = false;  // the caller's pass just found nothing
    } else {
      if (absl::Status s = step(&moved, &done); !s.ok()) return s;
      if (done) break;
    }
    if (moved) {
      idle = 0;
      idle_ns = 0;
      continue;
    }
    // More ranks than CPUs: nothing moved, so yield at once — the rank we wait for may need this very CPU, and
    // every further pass delays it (4 ranks on 2 CPUs switch ranks several times per small call). Most such
    // waits end after one or two yields, so the clock (for the 2 ms yield window) starts after the third yield
    // and is read every fourth: clock reads were 4% of the samples of a 4-rank 8-byte bench (perf), most here.
    if (oversubscribed_ && idle_ns < yield_ns) {
      const int pass = idle++;
      sched_yield();
      if (pass == 2) {
        idle_since = NowNs();
      } else if (pass > 2 && (pass & 3) == 2) {
        idle_ns = NowNs() - idle_since;
      }
      continue;
    }
    if (idle++ == 0) idle_since = NowNs();
    if (idle < 8) continue;                               // a few passes before reading the clock at all
    if ((idle & 7) == 0) idle_ns = NowNs() - idle_since;  // then every 8th pass (the clock costs ~20 ns)
    // Waiting for a peer that is reading our buffer: keep spinning (see kAckSpinNs).
    const bool acking = !oversubscribed_ && !awaiting_ack_.empty();
    if (idle_ns < spin_ns || (acking && idle_ns < kAckSpinNs)) {
      long_spin = long_spin || idle_ns >= spin_ns;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    if (idle_ns < yield_ns) {
      sched_yield();
      continue;
    }
    const absl::Duration slice = absl::Milliseconds(50);
    const absl::Time t0 = absl::Now();
    if (absl::Status s = Block(slice, step); !s.ok()) return s;
    const absl::Duration slept = absl::Now() - t0;
    blocked += slept;
    unchecked += slept;
    // The checks below cost a /proc read per peer and a store round trip: only once per slice of blocked time,
    // not after every wake-up that data caused (a wait woken a few times a millisecond paid them every time).
    if (unchecked < slice) continue;
    unchecked = absl::ZeroDuration();
    if (absl::Status s = check(); !s.ok()) return s;
    if (abort_probe_) {
      if (absl::Status s = abort_probe_(); !s.ok()) return s;
    }
    if (blocked > timeout_) return expired(blocked);
  }
  if (idle >= 8 && !long_spin) {
    const int64_t waited = NowNs() - idle_since;
    if (waited <= spin_ns) {
      spin_ns_ = std::max(spin_ns_, spin_ns);  // spinning worked (a probe that worked restores the full spin)
    } else {
      spin_ns_ = std::max<int64_t>(kMinSpinNs, spin_ns_ / 2);
    }
  }
  return absl::OkStatus();
}

absl::Status StreamEndpoint::WaitAll() {
  if (!broken_.ok()) return broken_;
  while (pending_ > 0) {
    // Wait on the oldest unfinished op; Wait progresses everything.
    uint64_t id = base_id_;
    while (Find(id) != nullptr && Find(id)->done) ++id;
    if (Find(id) == nullptr) break;
    if (absl::Status s = Wait(id); !s.ok()) return s;
  }
  Retire();
  if (returning_peers_ > 0 && broken_.ok()) LeaveReturns();
  return broken_;
}

std::string StreamEndpoint::DescribeLink(int peer) const {
  if (peer < 0 || peer >= size() || !pairs_[static_cast<size_t>(peer)]) return "none";
  return pairs_[static_cast<size_t>(peer)]->Describe();
}

}  // namespace hccltune

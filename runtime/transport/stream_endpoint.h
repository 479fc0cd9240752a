// StreamEndpoint: the Endpoint implementation over one Pair per peer (shm, TCP or a mix for `auto`).
//
// Framing: every message is a 32-byte header followed by its payload, or, for a large message over a pair
// whose peer can read this process's memory (shm with CMA, SingleCopyLink::PeerCanReadMemory), by a 16-byte descriptor
// (address, size): the receiver copies the payload straight from the sender's buffer and acknowledges, and
// the send completes on that acknowledgement (single copy; the sender's buffer must stay unchanged until its
// send completes, as for every Isend). From 64 KiB the two sides share that copy: the sender, while it waits for
// the acknowledgement, writes the front half into the receiver's buffer (SingleCopyLink::RequestPeerWrite), so both
// cores copy. The header carries the payload size and the *call descriptor* of the collective that sent it (operation
// sequence number, collective, dtype, op, count, root), so a rank that disagrees with its peer about the call is
// reported by name and value
// ("rank 2 called allreduce with 1000 elements, rank 0 with 1024") instead of hanging or corrupting memory.
// Message k between two ranks in one direction travels on lane k % lanes (TCP channels), so several
// in-flight messages use several connections.
//
// Waiting: progress every posted operation; while nothing moves, spin, then sched_yield, then block on the
// doorbell (shm) or poll() the sockets (TCP) in slices, checking peer liveness, up to the exec timeout. The
// spin is adaptive: when every rank on this host can have a CPU of its own (shm pairs report the node's rank
// count) a rank spins for up to kSpinUs before yielding, which keeps small-message latency at cache-line
// round trips; when ranks outnumber CPUs (4 ranks on 2 cores) spinning only delays the peer that needs this
// core, so the rank yields at once (no spin) and blocks only after 2 ms of yielding — or, when all its links are
// sockets (TCP pairs report the node's rank count too), blocks in poll() at once, since the kernel wakes it when
// bytes arrive. Only sends with bytes to write now are polled for room (a forward send waiting for its receive
// is not: its socket is writable, and poll() would return at once).
//
// Mailbox exchange (Endpoint::Exchange; the whole communicator on one node, runtime/transport/mailbox.h): the
// block goes into this rank's mailbox slot behind a word with the exchange number and the same 32-byte header
// a message carries (so a mismatched call is reported the same way), the shm peers' doorbells are rung, and
// the wait above polls the other ranks' slots instead of queues. A message in a ring when the exchange begins
// (one nobody received: the ranks disagreed on an earlier call), or one arriving from a rank that has not
// posted (it runs this call with another algorithm), is reported as a mismatch, not left to a hang.
//
// Thread-safety: one thread at a time (see Endpoint).
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/common/block_queue.h"
#include "runtime/common/types.h"
#include "runtime/transport/endpoint.h"
#include "runtime/transport/mailbox.h"
#include "runtime/transport/pair.h"

namespace hccltune {

// What every message of one collective call carries, set by the communicator before the call.
struct CallDescriptor {
  uint32_t sequence = 0;
  Collective collective = Collective::kBarrier;
  DataType dtype = DataType::kUint8;
  ReduceOp op = ReduceOp::kSum;
  uint64_t count = 0;
  int32_t root = 0;
};

class StreamEndpoint final : public Endpoint,
                             public RecvReduceEndpoint,
                             public ForwardEndpoint,
                             public ReturnEndpoint,
                             public MailboxEndpoint {
 public:
  // pairs[i] is the link to rank i (null for this rank). `doorbell` may be null when no pair is shm.
  StreamEndpoint(int rank, std::vector<Pair*> pairs, Doorbell* doorbell, absl::Duration timeout);
  // Pairs and doorbell are not owned; they outlive the endpoint and may be shared by several endpoints
  // (calls are serialised, so each byte stream stays in order).
  ~StreamEndpoint() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(pairs_.size()); }
  OpHandle Isend(int peer, const void* data, size_t bytes) override;
  OpHandle Irecv(int peer, void* data, size_t bytes) override;
  // Every ability (EndpointCapabilities); in-place return only over pairs that have it (SupportsReturn), the
  // mailbox exchange once SetMailbox gave this endpoint one (ExchangeCapacity).
  EndpointCapabilities capabilities() override { return {this, this, this, this}; }
  // Receive-and-reduce: from the shm ring in place (RingReads::Peek), otherwise staged through a small buffer.
  OpHandle IrecvReduce(int peer, void* out, const void* local, size_t bytes, const Combiner* combiner) override;
  // Receive-and-forward: the send waits in its queue, gated by the receive's progress; over shm each piece read
  // from the ring (or reduced, in L1-sized tiles) is written to the next ring at once when the send is at the
  // head of its queue and caught up, so the forwarded bytes come from the cache.
  OpHandle IrecvForward(int from, void* out, const void* local, size_t bytes, const Combiner* combiner, int to,
                        OpHandle* send) override;
  // In-place return over shm pairs (ReturnLink::BeginReturns): the receiver reduces in L1-sized tiles, writes each tile
  // to its output and back over the message in the ring, and the sender copies it from there into `result`.
  bool SupportsReturn(int peer) const override;
  OpHandle IsendReturn(int peer, const void* data, size_t bytes, void* result) override;
  OpHandle IrecvReduceReturn(int peer, void* out, const void* local, size_t bytes, const Combiner* combiner) override;
  // Mailbox exchange (Endpoint::Exchange) once SetMailbox gave this endpoint one.
  size_t ExchangeCapacity() const override;
  absl::Status Exchange(const void* data, size_t bytes, const void** blocks) override;
  absl::Status Wait(OpHandle op) override;
  absl::Status WaitAll() override;
  EndpointStats stats() const override { return stats_; }
  void ResetStats() override { stats_ = {}; }

  void SetCall(const CallDescriptor& call) { call_ = call; }
  // This call's stream region (runtime/common/stream_copy.h): receives whose destination lies in it are written
  // with non-temporal stores (from the shm ring, or from a single-copy read through an L2-sized stage).
  void SetStreamRegion(const StreamRegion& region) { stream_ = region; }
  // Adds (or replaces) the link to `peer`; used as sub-groups connect more TCP links.
  // REQUIRES: no operation pending.
  void AttachPair(int peer, Pair* pair);
  bool HasPair(int peer) const { return peer >= 0 && peer < size() && pairs_[static_cast<size_t>(peer)] != nullptr; }
  void SetTimeout(absl::Duration timeout) { timeout_ = timeout; }
  // The mailbox of this endpoint's ranks (not owned; shared with the communicator's other endpoints over the
  // same ranks, which take their exchange numbers from it). REQUIRES: every rank of the endpoint is in it.
  void SetMailbox(Mailbox* mailbox) {
    mailbox_ = mailbox;
    slots_.clear();
    seen_.clear();
  }
  // Called about every 50 ms while blocked; a non-OK status (e.g. another rank announced it aborted this
  // call) ends the wait with that status.
  void SetAbortProbe(std::function<absl::Status()> probe) { abort_probe_ = std::move(probe); }
  // Describes the link to `peer` ("shm", "tcp eth0 10.0.0.2:4000 x2").
  std::string DescribeLink(int peer) const;
  // The pair to `peer`, null when none is attached.
  const Pair* PairTo(int peer) const { return HasPair(peer) ? pairs_[static_cast<size_t>(peer)] : nullptr; }
  // The operation number (CallDescriptor::sequence) of the last collective that posted a message to or from
  // `peer` here, or exchanged blocks with it through the mailbox; 0 = none (point-to-point is not counted).
  uint32_t LastCollectiveWith(int peer) const {
    return HasPair(peer) ? std::max(used_[static_cast<size_t>(peer)], mailbox_ != nullptr ? exchanged_ : 0) : 0;
  }

  struct Header;

 private:
  struct Op;
  struct Queue {
    std::deque<uint64_t> ops;  // op ids, head first
  };
  Queue& QueueFor(int peer, bool send, int lane);
  // Posts a send; `gate` (id + 1 of a receive, 0 = none) limits its payload to what that receive has stored;
  // `returns`: an IsendReturn, complete once the returned bytes are in `result`.
  OpHandle PostSend(int peer, const void* data, size_t bytes, uint64_t gate, bool returns = false,
                    uint8_t* result = nullptr);
  // In-place return periods: the pair with `peer` enters one at its first return operation and leaves it once
  // nothing is pending with that peer (checked after every wait). EnterReturns returns false, with the endpoint
  // broken, when the pair cannot (not shm) or other operations with the peer are pending; the operation is then
  // not posted (Refused: a completed handle; waits return the error). A plain operation with a peer in a period
  // breaks the endpoint too (MixedWithReturns): its frame would be returned and taken for a result.
  bool EnterReturns(int peer);
  void LeaveReturns();
  OpHandle Refused();
  void MixedWithReturns(int peer, const char* what);
  // Copies returned bytes into the results of the sends awaiting them (in order per peer).
  void CheckReturns(bool* moved);
  // Combines `bytes` from ring memory `in` into op.data and writes the result back over `in`.
  void CombineReturn(Op& op, uint8_t* in, size_t bytes);
  // A received header's return flag against what the receive expects.
  absl::Status CheckReturnFlag(const Op& op) const;
  // The forward send of receive `op` when this rank can write the receive's next bytes into it right now.
  Op* FusableForward(const Op& op);
  // Writes `bytes` just stored at `op`'s payload_done into its forward send `fwd` (as much as the ring takes).
  // Returns false when the ring took less (the send then catches up from the output buffer).
  absl::StatusOr<bool> FuseForward(Op& fwd, const void* bytes_src, size_t bytes);
  // Stores `bytes` of a plain receive's payload from `in` (ring memory) into op.data (non-temporal stores in the
  // stream region) and forwards them when the forward send is fusable.
  absl::Status StorePlain(Op& op, const void* in, size_t bytes);
  absl::Status CombineForward(Op& op, const void* in, size_t bytes);
  // One pass over every queue head; sets *moved when bytes moved.
  absl::Status Progress(bool* moved);
  absl::Status ProgressSend(Op& op, bool* moved);
  // Whether send `op` has bytes to write now: false for a forward send that has sent everything its receive has
  // stored so far (it waits for the receive, not for its socket).
  bool CanWriteNow(const Op& op);
  absl::Status ProgressRecv(Op& op, bool* moved);
  absl::Status ProgressReduce(Op& op, Pair& pair, bool* moved);
  absl::Status ProgressSingleCopy(Op& op, Pair& pair, bool* moved);
  // The header of a `bytes`-byte message (or mailbox block) of the current call.
  Header CallHeader(uint64_t bytes) const;
  // Compares a header that `peer` sent (a message's, or its mailbox block's) with this rank's call and the
  // `bytes` it expects.
  absl::Status CheckHeader(const Header& h, int peer, uint64_t bytes) const;
  // Exchange's checks before it posts (capacity, nothing pending, no stray message) and its slot table; an error
  // has broken the endpoint. Exchange tests inline whether all would pass and calls this only when one may not.
  absl::Status BeginExchange(size_t bytes);
  // Exchange: an error when `peer`'s ring holds a message (which no exchange would read), naming the call it
  // belongs to when its header says.
  absl::Status StrayMessage(int peer, uint64_t bytes);
  // Sleeps on the doorbell (or polls the sockets) for up to `slice`, unless `step` (see WaitLoop), run after the
  // sleep is announced, finds progress.
  absl::Status Block(absl::Duration slice, absl::FunctionRef<absl::Status(bool*, bool*)> step);
  // The waiting policy shared by Wait and Exchange (see the file comment): `step(&moved, &done)` makes one pass;
  // `check()` runs once per 50 ms blocked (liveness, mismatches); `expired(blocked)` is the timeout's error.
  // `wait_first`: the caller has just made a pass of its own that found nothing, so the loop begins by waiting.
  // Returns the first error; the caller breaks the endpoint with it.
  absl::Status WaitLoop(absl::FunctionRef<absl::Status(bool*, bool*)> step, absl::FunctionRef<absl::Status()> check,
                        absl::FunctionRef<absl::Status(absl::Duration)> expired, bool wait_first = false);
  absl::Status Fail(absl::Status s);
  // Notes what waiting on `pair` involves: its poll fds (any_polled_ / any_unpolled_) and its host's CPUs.
  void NotePair(Pair* pair);
  Op* Find(uint64_t id);
  bool PeerPending(size_t peer) const;
  // Whether a send to `peer` is queued or waits for its single-copy acknowledgement.
  bool SendingTo(int peer) const;
  // A single-copy send whose descriptor is in the stream leaves its queue (so the next message on the pair can
  // go out while the peer reads) and waits here for the peer's acknowledgement.
  void AwaitAck(uint64_t id);
  void CheckAcks(bool* moved);
  absl::StatusOr<bool> SkipPad(Op& op, Pair& pair, bool* moved);
  void Retire();

  int rank_;
  std::vector<Pair*> pairs_;
  std::vector<PairCapabilities> caps_;  // by peer: pairs_[peer]->capabilities(), asked once when attached
  Doorbell* doorbell_;
  absl::Duration timeout_;
  CallDescriptor call_;
  StreamRegion stream_;
  EndpointStats stats_;
  absl::Status broken_;
  std::function<absl::Status()> abort_probe_;
  Mailbox* mailbox_ = nullptr;
  // Exchange: by rank, the number of the last exchange whose block this rank has seen (seen in exchange k:
  // seen_[q] == k; nothing to reset per exchange).
  std::vector<uint64_t> seen_;
  // Exchange: every rank's two mailbox slots (2 * rank + parity), looked up once (a virtual call per rank and
  // poll was a fifth of a small call's own instructions).
  std::vector<uint8_t*> slots_;

  BlockQueue<Op> ops_;  // ops_[i] has id base_id_ + i (no allocation per operation)
  uint64_t base_id_ = 0;
  uint64_t pending_ = 0;
  std::vector<Queue> queues_;           // [peer][dir][lane]
  std::vector<uint64_t> awaiting_ack_;  // single-copy sends out of their queue, not yet read by the peer
  // Per peer: IsendReturn sends whose results are not all back, in post order (only the oldest can move).
  std::vector<std::deque<uint64_t>> returns_;
  size_t returns_pending_ = 0;
  // Per peer: the pair is in an in-place return period. After an error the endpoint is broken and the pair stays
  // in its period (its ring positions are not known to agree any more); the communicator is broken with it and
  // never uses the pair again (an invalid-peer error, which leaves a communicator usable, cannot arise here:
  // RingAllreduceReturned's peer is always the ring's next rank).
  std::vector<uint8_t> returning_;
  int returning_peers_ = 0;
  bool posting_return_ = false;                // IrecvReduceReturn is posting through Irecv
  std::vector<uint64_t> send_seq_, recv_seq_;  // messages posted per peer, per direction
  std::vector<uint32_t> used_;                 // per peer: LastCollectiveWith, messages
  uint32_t exchanged_ = 0;                     // LastCollectiveWith, mailbox exchanges
  std::vector<uint8_t> stage_;                 // receive-and-reduce staging when the pair cannot Peek (allocated once)
  std::vector<uint8_t> tile_;                  // fused receive-reduce-forward: one L1-sized result tile
  int max_lanes_ = 1;
  bool oversubscribed_ = false;  // more ranks on this host's shm than CPUs this process may run on
  bool own_cpu_ = false;         // bound to one CPU and no more shm ranks than CPUs: spin, never yield
  int64_t spin_ns_ = INT64_MAX;  // adaptive spin budget (see Wait)
  uint32_t waits_ = 0;           // waits so far (every 64th probes with the full spin; WaitLoop)
  bool any_polled_ = false;      // some pair has file descriptors to poll (TCP)
  bool any_unpolled_ = false;    // some pair has none (shm: its progress is seen through the doorbell)
};

}  // namespace hccltune

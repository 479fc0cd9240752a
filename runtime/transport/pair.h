// Pair: a reliable, ordered byte stream in each direction between this rank and one peer, split into
// `lanes()` independent sub-streams (TCP channels; shm has one). Transports implement it; StreamEndpoint turns
// pairs into the message-level Endpoint that algorithms see.
//
// Thread-safety: a Pair is driven by one thread at a time.
#pragma once

#include <poll.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace hccltune {

// Optional abilities of a pair (capability interfaces). A transport's pair implements those it has and returns
// them from Pair::capabilities(); StreamEndpoint asks once, when the pair is attached, and keeps the pointers, so
// the per-chunk paths make no query and no cast. Each is driven by the thread driving the pair.

// Zero-copy reads (shm): the ring's bytes are read where they lie.
class RingReads {
 public:
  // The contiguous bytes readable now on `lane` at its read position, left in place until Consume(lane, n)
  // releases the first n of them; *bytes may be fewer than all readable bytes (ring wrap). Returns false when
  // nothing can be exposed now.
  virtual bool Peek(int lane, const void** data, size_t* bytes) = 0;
  virtual void Consume(int lane, size_t bytes) = 0;

 protected:
  ~RingReads() = default;
};

// Single copy (shm with cross-memory attach, CMA): instead of streaming a large message, the writer sends only its
// address and the reader copies it straight out of the writer's memory (process_vm_readv), then acknowledges. One
// copy per byte instead of two (writer -> ring -> reader), and no cache-line ping-pong on the ring.
class SingleCopyLink {
 public:
  // True when the peer has verified (at setup) that it can read this process's memory, so a send of at least
  // SingleCopyMinBytes() and at most SingleCopyMaxBytes() may use single copy. The reader handles both kinds of
  // message either way.
  virtual bool PeerCanReadMemory() const = 0;
  virtual size_t SingleCopyMinBytes() const = 0;
  virtual size_t SingleCopyMaxBytes() const = 0;
  // Reader: copies `bytes` from address `remote` in the peer's address space into `dst`. Errors name the
  // peer (it died: Unavailable; the kernel refused: PermissionDenied).
  virtual absl::Status ReadPeerMemory(uint64_t remote, void* dst, size_t bytes) = 0;
  // Reader: one more single-copy message from the peer is completely read (in order; the writer may reuse
  // its buffer). Writer: how many of its single-copy messages the peer has read so far.
  virtual void AckPeerRead() = 0;
  virtual uint64_t PeerReadsAcked() const = 0;
  // Writer: numbers single-copy messages in the order they are posted on this pair (shared by every endpoint
  // that uses the pair); the message is read once PeerReadsAcked() reaches its number.
  virtual uint64_t TakeSingleCopyTicket() = 0;
  // Shared single copy: a large single-copy message is copied by both sides at once. The reader asks the writer —
  // which only waits for the acknowledgement meanwhile — to write the message's first `bytes` straight into the
  // reader's buffer at `dst` (process_vm_writev) while the reader reads the rest; the front part is then claimed
  // by whichever side gets to it first (the writer while it waits, else the reader once its own part is done),
  // so a busy writer never delays the reader. Message `ticket` is the reader's next single-copy message
  // (NextReadTicket()).
  // Reader: whether the writer can write into this process (the peer's probe) and help is worth asking.
  virtual bool PeerCanWriteMemory() const = 0;
  // Whether this rank and the peer are bound to the same single CPU (false when either is not bound to one):
  // then they never run at once, and splitting a copy between them only adds the handshake.
  virtual bool SharesCpuWithPeer() const = 0;
  virtual uint64_t NextReadTicket() const = 0;
  virtual void RequestPeerWrite(uint64_t ticket, void* dst, size_t bytes) = 0;
  // Reader, after its own part: true once the front part is in place — copied by the writer, or read here from
  // `remote` because the writer had not claimed it (or failed). False: the writer is still copying; call again.
  virtual absl::StatusOr<bool> CompletePeerWrite(uint64_t ticket, uint64_t remote, void* dst, size_t bytes) = 0;
  // Writer, while waiting for message `ticket`'s acknowledgement (its payload starts at `src`): copies the
  // front part if the reader asked and it is not claimed yet; true when it did.
  virtual bool ServePeerWrite(uint64_t ticket, const void* src) = 0;

 protected:
  ~SingleCopyLink() = default;
};

// In-place return (shm): two ranks that each reduce what the other sent hand the results back through the same
// ring space, so a 2-rank allreduce needs no second ring for them. Between BeginReturns and EndReturns (both
// directions of the pair at once; one collective call) the reader's Consume (RingReads) no longer frees what it
// consumed but returns it: before consuming, the reader may rewrite the bytes Peek exposed, in place (its
// result); the writer then reads them with PeekReturned and frees them with TakeReturned. Positions are the
// writer's stream: returned bytes come back in the order they were written, headers and padding included. One
// lane only (PeekReturned has none; StreamEndpoint refuses returns over pairs with more).
// REQUIRES for BeginReturns: every earlier message from the peer consumed. For EndReturns: every message of the
// period consumed and every returned byte taken.
class ReturnLink {
 public:
  virtual void BeginReturns() = 0;
  virtual void EndReturns() = 0;
  // Writer: the contiguous returned bytes at its read-back position.
  virtual bool PeekReturned(const void** data, size_t* bytes) = 0;
  virtual void TakeReturned(size_t bytes) = 0;

 protected:
  ~ReturnLink() = default;
};

// A pair's optional abilities (null: it has none of that kind).
struct PairCapabilities {
  RingReads* ring = nullptr;
  SingleCopyLink* single_copy = nullptr;
  ReturnLink* returns = nullptr;  // requires `ring` (the reader rewrites what Peek exposed)
};

// The core every transport implements: moving bytes, and what the endpoint's wait loop asks of every pair.
class Pair {
 public:
  virtual ~Pair() = default;
  virtual int lanes() const = 0;
  // Non-blocking; return the bytes moved (0 when nothing could move now). An error means the link is gone.
  virtual absl::StatusOr<size_t> TryWrite(int lane, const void* data, size_t bytes) = 0;
  virtual absl::StatusOr<size_t> TryRead(int lane, void* data, size_t bytes) = 0;
  // Called after bytes moved, so a sleeping peer can be woken (shm doorbells). Default: nothing.
  virtual void Notify() {}
  // File descriptors to poll while blocked (TCP). Default: none (the endpoint's doorbell is used).
  virtual void AddPollFds(int lane, bool want_read, bool want_write, std::vector<pollfd>* fds) {
    (void)lane, (void)want_read, (void)want_write, (void)fds;
  }
  // Checks the peer is still alive where the transport cannot tell from the link itself (shm).
  virtual absl::Status CheckPeer() { return absl::OkStatus(); }
  // How many ranks run on this host's CPUs behind this link's transport (shm: the node's local ranks; 0 when
  // the transport does not know). Endpoints spin longer when every such rank can have a core of its own.
  virtual int HostRanks() const { return 0; }
  // "shm" or "tcp"; for messages.
  virtual std::string Describe() const = 0;
  // The optional abilities (above); the same answer for the pair's whole life.
  virtual PairCapabilities capabilities() { return {}; }
  // The IPv4 addresses of this link's first connection, this side's and the peer's ("10.77.1.1"); empty when the
  // link has none (shm). For the link inspector (Communicator::LinksUsed).
  virtual std::string LocalAddress() const { return ""; }
  virtual std::string PeerAddress() const { return ""; }
  // Bytes this side has written on the pair so far, every lane (for the flight recorder's links_used). Counted by
  // the thread driving the pair (Counted, one relaxed load and store: no atomic read-modify-write); read from any
  // thread at any time (relaxed: a reader may see a count some writes behind). shm answers from its ring head.
  virtual uint64_t BytesSent() const { return sent_.load(std::memory_order_relaxed); }

 protected:
  // TryWrite's return of `n` bytes moved, counted.
  size_t Counted(size_t n) {
    sent_.store(sent_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return n;
  }

 private:
  std::atomic<uint64_t> sent_{0};
};

// Blocks a rank until a peer may have made progress on one of its shm links (the rank's doorbell).
class Doorbell {
 public:
  virtual ~Doorbell() = default;
  // Announce that the caller is about to sleep; returns a token for Sleep.
  virtual uint32_t PrepareSleep() = 0;
  // Sleeps until rung after PrepareSleep or until `timeout_us`; clears the sleeping mark.
  virtual void Sleep(uint32_t token, int64_t timeout_us) = 0;
  // Clears the sleeping mark without sleeping.
  virtual void CancelSleep() = 0;
};

}  // namespace hccltune

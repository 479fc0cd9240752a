// Endpoint: the only view of the network an algorithm has (algorithms never see a concrete transport).
//
// An Endpoint is one rank's side of a group of `size()` ranks for one link choice (shm, tcp, ...). Every
// message is a block of bytes sent to one peer; between a pair of ranks messages are delivered in the order
// they were posted, and each receive matches the peer's next message to this rank. The receive's size must
// equal the send's size: a mismatch is reported as an error naming both ranks and sizes (never silent
// corruption). Zero-byte messages are allowed (they synchronise).
//
// Posting never blocks. Wait()/WaitAll() progress *every* posted operation of this endpoint (not just the one
// waited for), spinning briefly and then blocking, so a ring where every rank posts its send before its
// receive cannot deadlock. Each wait gives up after the exec timeout with DeadlineExceeded naming the peer
// it still waits for; a peer that died yields Unavailable naming it.
//
// Thread-safety: an Endpoint is used by one thread at a time (the communicator's progress thread).
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "runtime/common/stream_copy.h"

namespace hccltune {

using OpHandle = uint64_t;

// Counters an Endpoint keeps since creation (or ResetStats); tests use them to check message patterns.
// How a receive-and-reduce combines the incoming message with a local operand: out = local op incoming, element
// by element. Built by the algorithm layer (which owns the reduction kernels); transports only call it.
struct Combiner {
  size_t elem_bytes = 1;  // bytes per element; messages are whole elements
  // out[i] = local[i] op in[i] for i < elems (or in[i] op local[i]: the operand order is the algorithm's). `out` may
  // alias `local` exactly; `in` may be unaligned.
  void (*combine)(const Combiner& self, void* out, const void* local, const void* in, size_t elems) = nullptr;
  int dtype = 0;  // for `combine`'s own use (the algorithm layer stores DataType / ReduceOp here)
  int op = 0;
  StreamRegion stream;  // outputs inside it are written with non-temporal stores
};

struct EndpointStats {
  uint64_t sends = 0;  // messages posted with Isend
  uint64_t recvs = 0;  // messages posted with Irecv
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t single_copy_recvs = 0;     // received messages read straight from the sender's memory (Pair single copy)
  uint64_t forwarded_from_cache = 0;  // IrecvForward bytes written on as they arrived (not re-read from `out`)
  uint64_t exchanges = 0;             // mailbox exchanges (Exchange)
  uint64_t returned_in_place = 0;     // IrecvReduceReturn bytes reduced and handed back through the ring
};

// Optional abilities of an endpoint (capability interfaces). An endpoint implements those it has and returns them
// from Endpoint::capabilities(); an algorithm asks once per call (the group it builds keeps them) and calls
// through the pointers, never asking per chunk.

// Receive-and-reduce (single copy): receives the next message from `peer` like Irecv of `bytes` bytes, but
// instead of storing it writes out = local op message through `combiner` (which must outlive the operation).
// Endpoints whose transport can read a message in place (shm) combine straight from the shared ring, so the
// message is never copied into a staging buffer; others stage it in small pieces. Counted as a receive. An
// endpoint without it: the algorithm receives into scratch and reduces itself (same messages, same results).
class RecvReduceEndpoint {
 public:
  // REQUIRES: bytes % combiner->elem_bytes == 0; `out` and `local` alias exactly or not at all, and stay valid
  // until the operation completes.
  virtual OpHandle IrecvReduce(int peer, void* out, const void* local, size_t bytes, const Combiner* combiner) = 0;

 protected:
  ~RecvReduceEndpoint() = default;
};

// Receive-and-forward: receives the next message from `from` into `out` (plain, or out = local op message through
// `combiner` when it is not null) and sends the received (or reduced) bytes on to `to` as the next message of that
// direction, posted now: the same messages as IrecvReduce/Irecv followed, once that completes, by Isend(to, out,
// bytes) — but the send is in its queue from the start and moves each piece as soon as it has arrived, straight
// from the cache (a pipelined ring forwards chunk by chunk without re-reading the output from memory). Returns the
// receive's handle and stores the send's in *send.
// REQUIRES: the IrecvReduce / Irecv requirements; to != rank(); `out` is not written by anyone else until the send
// completes. Deadlock-free under the usual rule: every rank posts its messages to a peer in the order that peer
// posts the receives.
class ForwardEndpoint {
 public:
  virtual OpHandle IrecvForward(int from, void* out, const void* local, size_t bytes, const Combiner* combiner, int to,
                                OpHandle* send) = 0;

 protected:
  ~ForwardEndpoint() = default;
};

// In-place return, for two ranks that each reduce what the other sent (a 2-rank allreduce): the receiver reduces
// the sender's message and hands the result back through the memory the message arrived in (shm), so the results
// need no messages of their own. IsendReturn sends `bytes` from `data` like Isend and completes once the peer's
// result for them is in `result`; IrecvReduceReturn receives like IrecvReduce (out = local op message) and returns
// `out`'s bytes to the sender. Each is one message of its direction, matched in order as any other; a return
// operation matched with a plain one is reported as a mismatch by the receiver (the sender, waiting for its
// result, ends with the peer's abort or the exec timeout). A return send is never eager: it completes only once
// the peer has posted and progressed the matching IrecvReduceReturn, so both sides must post before they wait.
// Over a link that cannot return (TCP), or mixed with other operations with the peer, the operation is refused
// and the endpoint broken.
// REQUIRES: SupportsReturn(peer); from the first return operation with `peer` until they have all completed,
// every operation with `peer` is one (IsendReturn to it, IrecvReduceReturn from it), and none other is pending
// with it when the first is posted; `result` may alias `data` exactly; the IrecvReduce requirements, and a
// non-null `combiner` (a return hands back what was reduced).
class ReturnEndpoint {
 public:
  // Whether the link to `peer` can return (an endpoint may mix links that can and cannot).
  virtual bool SupportsReturn(int peer) const = 0;
  virtual OpHandle IsendReturn(int peer, const void* data, size_t bytes, void* result) = 0;
  virtual OpHandle IrecvReduceReturn(int peer, void* out, const void* local, size_t bytes,
                                     const Combiner* combiner) = 0;

 protected:
  ~ReturnEndpoint() = default;
};

// Exchange through a node-wide mailbox (runtime/transport/mailbox.h; shm, every rank of the endpoint on one
// node): every rank posts one block of `bytes` (at most ExchangeCapacity(); 0: no mailbox attached) and gets in
// blocks[i] a pointer to rank i's block, its own included (a copy of `data`), read in place where the rank wrote
// it. The blocks stay valid and unchanged until this rank's next Exchange. Every rank of the endpoint must call it
// for the same call with the same `bytes` (checked, as messages are, against the call descriptor); waiting,
// timeouts and dead peers as for Wait. REQUIRES: no operation pending; blocks has size() entries.
class MailboxEndpoint {
 public:
  virtual size_t ExchangeCapacity() const = 0;
  virtual absl::Status Exchange(const void* data, size_t bytes, const void** blocks) = 0;

 protected:
  ~MailboxEndpoint() = default;
};

// An endpoint's optional abilities (null: it has none of that kind).
struct EndpointCapabilities {
  RecvReduceEndpoint* recv_reduce = nullptr;
  ForwardEndpoint* forward = nullptr;
  ReturnEndpoint* returns = nullptr;
  MailboxEndpoint* mailbox = nullptr;
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // REQUIRES: 0 <= peer < size(), peer != rank(); `data` stays valid (and, for sends, unchanged) until the
  // operation completes.
  virtual OpHandle Isend(int peer, const void* data, size_t bytes) = 0;
  virtual OpHandle Irecv(int peer, void* data, size_t bytes) = 0;

  // Progresses all posted operations until `op` is complete. After an error the endpoint is broken: every
  // later call returns the same error.
  virtual absl::Status Wait(OpHandle op) = 0;
  // Progresses until every posted operation is complete.
  virtual absl::Status WaitAll() = 0;

  virtual EndpointStats stats() const = 0;
  virtual void ResetStats() = 0;

  // The optional abilities (above); the same answer for the endpoint's whole life.
  virtual EndpointCapabilities capabilities() { return {}; }

  // Blocking conveniences built on the above.
  absl::Status Send(int peer, const void* data, size_t bytes) { return Wait(Isend(peer, data, bytes)); }
  absl::Status Recv(int peer, void* data, size_t bytes) { return Wait(Irecv(peer, data, bytes)); }
  // Posts the receive and the send together, then waits for both.
  absl::Status SendRecv(int send_peer, const void* send_data, size_t send_bytes, int recv_peer, void* recv_data,
                        size_t recv_bytes) {
    const OpHandle r = Irecv(recv_peer, recv_data, recv_bytes);
    const OpHandle s = Isend(send_peer, send_data, send_bytes);
    absl::Status st = Wait(r);
    absl::Status st2 = Wait(s);
    return st.ok() ? st2 : st;
  }
};

}  // namespace hccltune

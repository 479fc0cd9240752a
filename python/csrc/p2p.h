// Tagged point-to-point for the torch backend, with receives from any source.
//
// Matching (gloo's rules, so a script behaves the same on both backends): the messages one rank sends to
// another with one tag are received in the order they were sent; messages with different tags, or from
// different ranks, are independent. A receive from a given rank claims that rank's next unclaimed message with
// its tag as soon as it is posted; a receive from any source takes, among the messages with its tag that no
// receive has claimed, the one whose announcement arrived first. Unlike MPI, a specific receive posted after a
// still-waiting any-source receive may take the message the any-source one would have got (gloo does the same;
// tests/python/anysource_test.py checks it on both backends).
//
// Protocol (no unbounded buffering: a payload moves only into a posted buffer). Per direction, each send gets
// a sequence number per tag. Messages, each a 32-byte header on the pair's stream:
//   CTS(tag, seq, bytes)  receiver -> sender: "I have a buffer of `bytes` for your send number `seq` with `tag`"
//   DATA(tag, seq, bytes, accepted), then the payload when the sizes agree
//   WANT                  receiver -> sender, once per pair: "I receive from any source: announce your sends"
//   RTS(tag, seq, bytes)  sender -> receiver, only after a WANT: "my send number `seq` with `tag` is waiting"
// A specific receive claims its peer's next sequence number for its tag at once and sends a CTS; a send that
// finds its CTS sends DATA, otherwise it waits for it — the whole protocol of a program that never receives
// from any source, as cheap as it was before any-source existed. The first any-source receive sends WANT on
// every pair (and every pair opened later); from then on a send to that rank that finds no CTS announces
// itself with an RTS (sends already waiting are announced when the WANT arrives). An any-source receive claims
// the first announced, unclaimed send with its tag from any peer and answers it with a CTS; announcements whose
// send a CTS already claimed are dropped on arrival. A size mismatch fails both sides naming the sizes; no
// payload follows, so the stream stays in step and later messages are intact.
//
// Transport: each pair of ranks that talks gets two 2-rank Communicators (one per direction, rendezvousing
// through the group's c10d store under "p2p/<lo>-<hi>/<from>-<to>/"), a writer thread (connects, then sends
// headers and payloads in order) and a reader thread, which reads only while the peer owes this rank a message
// (a CTS or WANT for an unmatched send, DATA for a claimed receive, an RTS while an any-source receive waits)
// and otherwise sleeps outside the transport. Point-to-point therefore
// never runs on the collective progress thread. Channels are created on first use by either side; a rank that
// creates one announces it in the store ("p2p/hello/<to>" counter + entries), and a rank with a pending
// any-source receive polls that counter and joins the channels peers opened towards it.
//
// Timeouts and failures: every operation fails after `op_timeout` (the group's timeout) if it has not
// completed. A failure tied to a pair (transport error, a matched operation timing out, a dead peer) breaks
// that pair: every pending and later operation between the two ranks fails with the first error, and the pair's
// communicators are aborted through the store so the peer learns it at once. An unmatched any-source receive
// that times out breaks nothing. The transport's own timeout is set far out (the engine enforces deadlines), so
// an idle pair never times out.
//
// Thread-safety: Post* may be called from any thread. `done` callbacks run on the engine's threads, exactly
// once per operation, never under the engine's lock.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "runtime/common/config.h"

namespace hccltune::torch_backend {

class P2pEngine {
 public:
  // `source`: for a receive, the rank the message came from (-1 when it failed before matching); -1 for sends.
  using Done = std::function<void(absl::Status status, int source)>;
  static constexpr int kAnySource = -1;

  // `store` is the group's (already prefixed) c10d store; `env` configures the per-pair communicators;
  // `op_timeout` bounds how long a posted operation may wait (connecting its pair included).
  P2pEngine(int rank, int size, c10::intrusive_ptr<c10d::Store> store, Environment env,
            std::chrono::milliseconds op_timeout);
  // Fails operations still pending with a "process group destroyed" error, aborts the pairs (the peers'
  // pending operations with this rank fail at once) and stops the threads.
  ~P2pEngine();
  P2pEngine(const P2pEngine&) = delete;
  P2pEngine& operator=(const P2pEngine&) = delete;

  // REQUIRES: 0 <= peer < size, peer != rank (PostRecv also takes kAnySource); `data` stays valid until `done`
  // ran.
  void PostSend(int peer, int tag, const void* data, size_t bytes, Done done);
  void PostRecv(int peer, int tag, void* data, size_t bytes, Done done);

  struct State;  // shared with the engine's threads (they may outlive the engine briefly; see the destructor)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace hccltune::torch_backend

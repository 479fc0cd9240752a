// Tagged point-to-point for the torch backend: torch's send/recv carry a tag, and messages between one pair of
// ranks match by (peer, tag) — the k-th send with tag T to a rank pairs with that rank's k-th recv with tag T
// from this rank — not by the order in which they were issued (as gloo matches them).
//
// Protocol (receiver-driven rendezvous, no unbounded buffering): a posted recv sends a small clear-to-send
// message CTS(tag, bytes) to the sender; a posted send waits for a CTS with its tag, then sends DATA(tag,
// bytes) followed by the payload, which the receiver reads straight into the posted buffer of the first
// pending recv with that tag. A size mismatch fails both sides' operations with a message naming the sizes,
// and keeps the stream in step (no payload follows a refused DATA).
//
// Transport: for each pair of ranks that actually talks, two 2-rank Communicators are created on first use
// (one per direction, rendezvousing through the group's c10d store under "p2p/<lo>-<hi>/<from>-<to>/"), so
// the writer thread of one direction never waits behind the reader of the other. Point-to-point therefore
// never runs on the collective progress thread: a pending recv does not hold up collectives, and two ranks
// that both send before they receive do not block each other. Each peer gets a writer thread (creates the
// communicators, then sends CTS and DATA in order) and a reader thread (reads only while this rank expects a
// message from that peer: a pending recv or an unmatched send), so an idle pair never hits the execution
// timeout. A transport error or timeout fails every pending operation with that peer and every later one.
//
// Thread-safety: Post* may be called from any thread. `done` callbacks run on the peer's reader or writer
// thread, exactly once per operation, never under the engine's locks.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/status.h"
#include "runtime/common/config.h"

namespace hccltune::torch_backend {

class P2pEngine {
 public:
  using Done = std::function<void(absl::Status)>;

  // `store` is the group's (already prefixed) c10d store; `env` configures the per-pair communicators (its
  // exec timeout bounds how long a posted operation may wait for its peer).
  P2pEngine(int rank, int size, c10::intrusive_ptr<c10d::Store> store, Environment env);
  // Stops the threads. Operations still pending fail with a "process group destroyed" error.
  ~P2pEngine();
  P2pEngine(const P2pEngine&) = delete;
  P2pEngine& operator=(const P2pEngine&) = delete;

  // REQUIRES: 0 <= peer < size, peer != rank; `data` stays valid until `done` ran.
  void PostSend(int peer, int tag, const void* data, size_t bytes, Done done);
  void PostRecv(int peer, int tag, void* data, size_t bytes, Done done);

 private:
  struct Channel;
  std::shared_ptr<Channel> ChannelFor(int peer);

  const int rank_;
  const int size_;
  const c10::intrusive_ptr<c10d::Store> store_;
  const Environment env_;
  std::mutex mu_;
  std::map<int, std::shared_ptr<Channel>> channels_;  // guarded by mu_
};

}  // namespace hccltune::torch_backend

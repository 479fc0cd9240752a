// UcxPair: the Pair (runtime/transport/pair.h) between this rank and one peer over a UCP endpoint, made from the
// peer's worker address. Each lane is a tag-matched message stream: tag = (lanes of the pair set, sender rank,
// lane), so the pairs of one worker never match each other's messages, and UCX matches a sender's messages in
// the order they were posted.
//
// Writes: small writes (headers, small frames, padding) are copied into a per-lane outbox and go out as one
// tagged message when the endpoint signals progress (Notify), before anything larger, or at 64 KiB; at most
// 4 MiB of copied bytes are in flight per lane (then TryWrite returns 0 until UCX has sent some). A write of
// 64 KiB or more is sent straight from the caller's memory (ucp_tag_send_nbx: UCX picks eager or its rendezvous
// protocol by size, zero-copy where the transport can) and TryWrite returns 0 until UCX completes it, then the
// whole write. Reads: the lane's next message is probed (ucp_tag_probe_nb) and received into a per-lane staging
// buffer that reads drain (one copy, as TCP's from the socket). Not straight into the caller's memory: a read that
// returned 0 may be followed by another operation's read into the same memory (StreamEndpoint stages every
// receive-and-reduce through one buffer), which a receive still in flight would overwrite. REQUIRES of the caller
// (StreamEndpoint keeps it: a lane's head operation retries at its own position): after a TryWrite of at least
// 64 KiB returned 0, the next TryWrite on that lane names the same memory and at least as many bytes, and that
// memory stays unchanged until the call returns them.
//
// Failures: UCX's peer failure handling (UCP_ERR_HANDLING_MODE_PEER) reports a dead peer or broken endpoint
// through the endpoint's error callback; every later call returns Unavailable naming the peer, "ucx", its
// transports and devices ("tcp/eth0") and the UCX status, and, for a peer on this node whose process is gone, that
// it exited or was killed (UCX's status for a dead peer over tcp is often "Endpoint timeout"). A peer on this
// node is also checked by its process (CheckPeer), which covers transports without peer failure handling (UCX
// 1.13's shared memory).
//
// Capabilities: none (no ring to read in place, no single copy, no in-place return); the endpoint stages
// receive-and-reduce in pieces, as over TCP.
//
// Thread-safety: driven by one thread at a time; every call holds the worker's lock (UcxWorker::Lock), which the
// worker's progress thread shares.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/transport/pair.h"
#include "runtime/transport/ucx/ucx_worker.h"

namespace hccltune::transport {

struct UcxPairInfo {
  int rank = 0;
  int peer = 0;
  int peer_pid = 0;    // the peer's process when it runs on this node (CheckPeer), else 0
  int host_ranks = 0;  // ranks of the communicator on this node (Pair::HostRanks)
  int lanes = 1;
  bool peer_errors = true;   // UCP_ERR_HANDLING_MODE_PEER (else NONE)
  std::string link = "ucx";  // the link kind it serves ("ucx", "roce", "ib"): in Describe() and errors
};

class UcxPair final : public Pair {
 public:
  // Creates the endpoint to `peer_address`. UCX's status when it cannot (Unreachable when no transport allowed
  // by UCX_TLS serves the error mode asked for) is in the error, named as above.
  static absl::StatusOr<std::unique_ptr<UcxPair>> Create(UcxWorker* worker, const std::string& peer_address,
                                                         const UcxPairInfo& info);
  ~UcxPair() override;

  // Cancels what is pending and closes the endpoint (forcibly: a dead peer does not answer), progressing the
  // worker until UCX has released every request of this pair (at most about a second). Called by the device for
  // all its pairs before any is destroyed; idempotent.
  void Close();

  int lanes() const override { return info_.lanes; }
  absl::StatusOr<size_t> TryWrite(int lane, const void* data, size_t bytes) override;
  absl::StatusOr<size_t> TryRead(int lane, void* data, size_t bytes) override;
  void Notify() override;
  void AddPollFds(int lane, bool want_read, bool want_write, std::vector<pollfd>* fds) override;
  absl::Status CheckPeer() override;
  int HostRanks() const override { return info_.host_ranks; }
  std::string Describe() const override { return info_.link + " " + transports_; }
  // The transports and devices UCX chose for this endpoint ("tcp/eth0", "posix/memory,cma/memory").
  const std::string& transports() const { return transports_; }

 private:
  struct Sent {
    void* request;
    std::vector<uint8_t> buffer;
  };
  struct Lane {
    std::vector<uint8_t> outbox;  // small writes not yet posted
    std::deque<Sent> in_flight;   // posted copies UCX has not finished with
    size_t in_flight_bytes = 0;
    void* direct = nullptr;  // a large send from the caller's memory
    const void* direct_data = nullptr;
    size_t direct_bytes = 0;
    std::vector<uint8_t> staged;  // a received message not yet read
    size_t staged_at = 0, staged_end = 0;
    void* recv = nullptr;  // a receive in progress (into `staged`)
    size_t recv_bytes = 0;
  };
  UcxPair(UcxWorker* worker, const UcxPairInfo& info);
  static void OnError(void* arg, ucp_ep_h ep, ucs_status_t status);
  uint64_t Tag(int sender, int lane) const;
  void* Post(const void* data, size_t bytes, int lane);
  absl::Status Flush(int lane);
  absl::Status FlushAll();
  absl::Status Reap(Lane& l);
  absl::StatusOr<size_t> FinishDirectSend(Lane& l, const void* data, size_t bytes);
  absl::StatusOr<size_t> FinishRecv(Lane& l, void* data, size_t bytes);
  absl::StatusOr<size_t> StartRecv(int lane, void* data, size_t bytes);
  size_t ReadStaged(Lane& l, void* data, size_t bytes);
  // Records the first failure (the endpoint's or a request's) and returns it, named; later calls return it.
  absl::Status Fail(ucs_status_t status);

  UcxWorker* worker_;
  UcxPairInfo info_;
  ucp_ep_h ep_ = nullptr;
  ucs_status_t ep_status_ = UCS_OK;  // set by OnError
  absl::Status broken_;
  std::string transports_ = "(not connected)";
  std::vector<Lane> lanes_;
  std::vector<std::vector<uint8_t>> spare_;  // outbox buffers to reuse
};

}  // namespace hccltune::transport

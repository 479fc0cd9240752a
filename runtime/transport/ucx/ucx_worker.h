// UcxWorker: one UCP context and its one worker, the UCX side of a communicator's ucx device for one network.
//
// Why per communicator (and per network): UCX_NET_DEVICES is a setting of the context, and ucx@SUBNET resolves to
// a different netdev on each node; a worker of its own gives each communicator its own tag space and its own lock
// (communicators may be driven from different threads; a shared worker would make them contend for one). What it
// costs: one context and worker per
// communicator that uses link=ucx (made at its first ucx connect, never for communicators that do not use it):
// UCX reads its configuration and opens its transports (a listening TCP socket per netdev, shared-memory
// segments) each time.
//
// Settings: UCX reads the UCX_* environment (UCX_TLS, UCX_NET_DEVICES, thresholds) as it does for any program;
// for ucx@SUBNET this context's NET_DEVICES is set to this node's netdev in the subnet, overriding
// UCX_NET_DEVICES; for roce / ib its NET_DEVICES, TLS and IB_* keys (Create). Features: tag matching and wake-up (the
// worker's event fd, for blocking waits).
//
// Background progress: a send UCX has taken may still need the sender's progress to reach the peer (the rest of a
// TCP write, a rendezvous the receiver starts later), but the communicator may go on to other work (a barrier over
// shm, the user's computation) once the pair has reported the bytes moved. While sends are in flight a thread of
// the worker progresses it whenever the communicator's thread has not for 500 us, and wakes a waiting
// communicator thread (wake fd) when that moved something; with nothing in flight it sleeps on a condition
// variable. The worker runs UCS_THREAD_MODE_SERIALIZED: every use of it holds the lock (Lock()).
//
// Thread-safety: the communicator's thread uses the worker and its pairs under Lock(); the progress thread only
// progresses, under the same lock.
#pragma once

#include <ucp/api/ucp.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace hccltune::transport {

class UcxWorker {
 public:
  // Settings of the context (ucp_config_modify keys, over what UCX read from UCX_*): NET_DEVICES for ucx@SUBNET
  // and the RDMA links, TLS and the IB_* keys for roce / ib (runtime/net/rdma_links.h); none leaves UCX's own
  // choice. Errors name the UCX call, the settings and the UCX status.
  using Settings = std::vector<std::pair<std::string, std::string>>;
  static absl::StatusOr<std::unique_ptr<UcxWorker>> Create(const Settings& settings);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Held around every use of the worker by the communicator's thread (it marks that thread active).
  std::unique_lock<std::mutex> Lock();
  // Parameters for a send whose completion the worker counts (a request returned by the send must then be
  // counted with SendPosted, under the lock).
  ucp_request_param_t SendParam();
  void SendPosted();
  ucp_worker_h worker() const { return worker_; }
  // The worker's address (an opaque blob peers make endpoints from).
  const std::string& address() const { return address_; }
  const std::string& net_devices() const { return net_devices_; }  // "" when not set
  // Progresses the worker until it has nothing more to do; true when it did something.
  bool Progress();
  // Prepares a blocking wait: progresses, then arms the worker's event fd. Returns the fd to poll for reading:
  // the event fd once armed, or an always-readable fd when progress found work (the caller must not sleep).
  int PrepareWait();
  // Readable when the progress thread moved something since the last PrepareWait (poll it with PrepareWait's fd).
  int wake_fd() const { return wake_fd_; }

 private:
  UcxWorker() = default;
  void Run();
  static void OnSendDone(void* request, ucs_status_t status, void* user);

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  int in_flight_ = 0;         // send requests not completed (OnSendDone)
  int64_t last_used_ns_ = 0;  // when the communicator's thread last took the lock
  int wake_fd_ = -1;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  int ready_fd_ = -1;  // an eventfd written once: always readable
  std::string address_;
  std::string net_devices_;
};

// "Connection reset by remote peer (UCS_ERR_CONNECTION_RESET)"-style text for a UCX status.
std::string UcxStatusText(ucs_status_t status);

}  // namespace hccltune::transport

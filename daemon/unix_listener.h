// UnixListener: hccl-tuned's unix socket, accepted by the daemon itself so each connection's SO_PEERCRED is known.
// Each accepted connection's credentials go to a PeerRegistry under its fd, then the fd is handed to gRPC
// (grpc::AddInsecureChannelFromFd), whose peer string for it is "fd:N" (daemon/peer_auth.h).
//
// Thread-safety: Bind, Serve and Stop from one owner thread; the accept loop runs on its own thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "daemon/peer_auth.h"

namespace hccltune::daemon {

class UnixListener {
 public:
  // Binds and listens on `path` (which must not exist), mode 0660.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Bind(const std::string& path);
  ~UnixListener();

  // Starts accepting: each connection is recorded in `registry` and served by `server`.
  void Serve(grpc::Server* server, PeerRegistry* registry);
  // Stops accepting (connections already handed to gRPC stay). Idempotent.
  void Stop();

 private:
  UnixListener() = default;
  void AcceptLoop(grpc::Server* server, PeerRegistry* registry);

  int fd_ = -1;
  std::thread thread_;
};

}  // namespace hccltune::daemon

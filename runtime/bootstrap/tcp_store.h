// TcpStore: the rendezvous store for `env://`-style bootstrap. One process (rank 0) runs the server on
// host:port; every rank (rank 0 included) is a client. The wire protocol is private to hccl-tune (it is not
// torch's TCPStore protocol) and starts with a magic number and version, so a wrong peer on the port is a
// clear error rather than a hang.
//
// Thread-safety: the server runs its own thread; a client serialises its requests with a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/store.h"

namespace hccltune {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 = any free port). Returns AlreadyExists-like errors naming the address.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port);
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
};

// Connects to the server, retrying until `timeout` (the server may start later than the client).
absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(const std::string& host, int port, absl::Duration timeout);

}  // namespace hccltune

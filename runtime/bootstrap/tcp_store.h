// TcpStore: the rendezvous store for `env://`-style bootstrap. One process (rank 0) runs the server on
// host:port; every rank (rank 0 included) is a client. The wire protocol is private to hccl-tune (it is not
// torch's TCPStore protocol) and starts with a magic number and version, so a wrong peer on the port is a
// clear error rather than a hang. Every length read from the socket is bounded (store_protocol.h). Every
// connection opens with the job handshake (runtime/common/job_auth.h): with a job secret each side proves it to the
// other, and with HCCL's whitelist on the server serves only the addresses it lists.
//
// Thread-safety: the server runs its own thread; a client serialises its requests with a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/store.h"
#include "runtime/bootstrap/store_protocol.h"
#include "runtime/common/job_auth.h"

namespace hccltune {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0 = any free port). Returns AlreadyExists-like errors naming the address. The
  // server holds and serves at most `limits` (runtime/bootstrap/store_protocol.h): a request over one gets an
  // error naming the limit. `auth` (LoadJobAuth): the job's secret and whitelist; a connection that fails them is
  // closed and logged once per address, and one that has not completed its handshake within kHandshakeTimeoutMs
  // is dropped. The defaults (no secret, no whitelist) are for tests.
  static absl::StatusOr<std::unique_ptr<TcpStoreServer>> Start(const std::string& host, int port,
                                                               const store_protocol::StoreLimits& limits = {},
                                                               JobAuth auth = {});
  virtual ~TcpStoreServer() = default;
  virtual int port() const = 0;
};

// The address a store server listens on for clients that connect to `host`: `host` itself when it is one of this
// host's IPv4 addresses (or a loopback name); otherwise "0.0.0.0", because a host name (or an address this host
// does not own, e.g. behind NAT) may resolve or route differently on the other nodes.
std::string StoreListenAddress(const std::string& host);

// Connects to the server, retrying until `timeout` (the server may start later than the client), and completes the
// job handshake with `auth`: PermissionDenied naming the server's address when it does not prove the same secret
// or refuses this process.
absl::StatusOr<std::shared_ptr<Store>> ConnectTcpStore(const std::string& host, int port, absl::Duration timeout,
                                                       const JobAuth& auth = {});

}  // namespace hccltune

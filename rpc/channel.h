// gRPC channels to hccl-tuned with hccl-tune's message-size limits: the one place clients (the CLI, the runtime's
// tuning client, benchmarks, tests) make them, so every client accepts the same table sizes.
//
// Thread-safety: stateless; a channel is safe from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/time/time.h"

namespace hccltune::rpc {

// A channel to `target` with hccl-tune's message-size limits: plaintext to a unix socket; to a TCP target TLS with
// the client certificate named by HCCL_TUNE_DAEMON_TLS_CA/_CERT/_KEY when set (docs/SECURITY.md), else plaintext.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target);

// How long a stream may wait on a silent daemon: an HTTP/2 ping after kKeepaliveTime without traffic, the
// connection given up (the stream ends UNAVAILABLE) when no answer comes within kKeepaliveTimeout. hccl-tuned
// accepts pings this often (TunerServer); older daemons answer too frequent pings by closing the connection.
inline constexpr absl::Duration kKeepaliveTime = absl::Seconds(20);
inline constexpr absl::Duration kKeepaliveTimeout = absl::Seconds(10);

// MakeChannel's channel with keepalive pings, for streams without a deadline (WatchSweep): a daemon host that
// died without resetting the connection ends them with UNAVAILABLE after about
// kKeepaliveTime + kKeepaliveTimeout instead of never.
std::shared_ptr<grpc::Channel> MakeKeepaliveChannel(const std::string& target);

}  // namespace hccltune::rpc

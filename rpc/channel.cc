#include "rpc/channel.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "runtime/common/config.h"
#include "runtime/common/logging.h"

namespace hccltune::rpc {
namespace {

grpc::ChannelArguments ChannelArgs() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(4 << 20);
  // A table of 1,000 entries is ~150 KB: a stream window that holds it whole avoids flow-control round trips.
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 << 20);
  return args;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : std::string();
}

// A unix target is plaintext (the daemon knows its caller from SO_PEERCRED); a TCP target uses TLS with the
// client certificate of HCCL_TUNE_DAEMON_TLS_* when they are set. A bad setting is logged and the channel made
// plaintext: the daemon then refuses it, and the call fails naming the daemon.
std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& target) {
  if (absl::StartsWith(target, "unix:")) return grpc::InsecureChannelCredentials();
  auto tls = Environment::LoadDaemonTls();
  if (!tls.ok()) {
    Log(LogLevel::kError, tls.status().message());
    return grpc::InsecureChannelCredentials();
  }
  if (!tls->enabled()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFile(tls->ca);
  o.pem_cert_chain = ReadFile(tls->cert);
  o.pem_private_key = ReadFile(tls->key);
  for (const auto& [text, var] : {std::pair{&o.pem_root_certs, "HCCL_TUNE_DAEMON_TLS_CA"},
                                  std::pair{&o.pem_cert_chain, "HCCL_TUNE_DAEMON_TLS_CERT"},
                                  std::pair{&o.pem_private_key, "HCCL_TUNE_DAEMON_TLS_KEY"}}) {
    if (text->empty()) Log(LogLevel::kError, var, ": cannot read the file it names");
  }
  return grpc::SslCredentials(o);
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target) {
  return grpc::CreateCustomChannel(target, Credentials(target), ChannelArgs());
}

std::shared_ptr<grpc::Channel> MakeKeepaliveChannel(const std::string& target) {
  grpc::ChannelArguments args = ChannelArgs();
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTime)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTimeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A watched sweep may send nothing for minutes: keep pinging without data (gRPC stops after 2 by default).
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(target, Credentials(target), args);
}

}  // namespace hccltune::rpc

#include "rpc/channel.h"

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

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target) {
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), ChannelArgs());
}

std::shared_ptr<grpc::Channel> MakeKeepaliveChannel(const std::string& target) {
  grpc::ChannelArguments args = ChannelArgs();
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTime)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(absl::ToInt64Milliseconds(kKeepaliveTimeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // A watched sweep may send nothing for minutes: keep pinging without data (gRPC stops after 2 by default).
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace hccltune::rpc

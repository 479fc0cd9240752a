// The TCP rendezvous store's bounds: the request parser's refusals, the server data's key and byte limits, and
// a real server refusing connections, garbage, oversized requests and buffered bytes over its limits with an
// error that names the limit, while its other clients go on.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/bootstrap/store_protocol.h"
#include "runtime/bootstrap/tcp_store.h"
#include "tests/unit/runtime/fault_util.h"

namespace hccltune {
namespace {

using store_protocol::kMaxKeyBytes;
using store_protocol::kMaxValueBytes;
using store_protocol::ParseStoreRequest;
using store_protocol::Request;
using store_protocol::StoreData;
using store_protocol::StoreLimits;
using ::testing::HasSubstr;
using testing::RawConnect;

std::string U32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string Str(const std::string& s) { return U32(static_cast<uint32_t>(s.size())) + s; }
std::string Req(uint8_t op, const std::string& key, const std::string* value = nullptr) {
  std::string r(1, static_cast<char>(op));
  r += Str(key);
  if (value != nullptr) r += Str(*value);
  return r;
}

TEST(StoreProtocol, ParsesCompleteRequestsAndWaitsForIncompleteOnes) {
  const std::string v = "value";
  const std::string full = Req(store_protocol::kSet, "key", &v);
  Request req;
  for (size_t n = 0; n < full.size(); ++n) {
    auto used = ParseStoreRequest(absl::string_view(full).substr(0, n), &req);
    ASSERT_TRUE(used.ok()) << used.status();
    EXPECT_EQ(*used, 0u) << "a prefix of " << n << " bytes";
  }
  auto used = ParseStoreRequest(full + "trailing", &req);
  ASSERT_TRUE(used.ok()) << used.status();
  EXPECT_EQ(*used, full.size());
  EXPECT_EQ(req.key, "key");
  EXPECT_EQ(req.value, "value");
}

TEST(StoreProtocol, RefusesUnknownOpsOversizedLengthsAndBadDeltas) {
  Request req;
  auto op = ParseStoreRequest("\x09", &req);
  EXPECT_THAT(op.status().message(), HasSubstr("unknown request op 9"));
  // The key's declared length is refused before its bytes arrive (nothing is allocated for it).
  auto key = ParseStoreRequest(std::string(1, '\x02') + U32(kMaxKeyBytes + 1), &req);
  EXPECT_THAT(key.status().message(),
              HasSubstr(absl::StrCat("key of ", kMaxKeyBytes + 1, " bytes is over the limit of ", kMaxKeyBytes)));
  auto value =
      ParseStoreRequest(std::string(1, '\x01') + Str("k") + U32(static_cast<uint32_t>(kMaxValueBytes + 1)), &req);
  EXPECT_THAT(value.status().message(),
              HasSubstr(absl::StrCat("value of ", kMaxValueBytes + 1, " bytes is over the limit of ", kMaxValueBytes)));
  const std::string bad = "12x";
  auto delta = ParseStoreRequest(Req(store_protocol::kAdd, "c", &bad), &req);
  EXPECT_THAT(delta.status().message(), HasSubstr("the delta is not a 64-bit integer"));
  const std::string huge(33, '1');
  auto long_delta = ParseStoreRequest(Req(store_protocol::kAdd, "c", &huge), &req);
  EXPECT_THAT(long_delta.status().message(), HasSubstr("add delta of 33 bytes is over the limit of 32"));
}

TEST(StoreProtocol, DataRefusesKeysAndBytesOverItsLimitsAndChangesNothing) {
  StoreLimits limits;
  limits.max_keys = 2;
  limits.max_stored_bytes = 20;
  StoreData data(limits);
  std::string reply;
  data.Apply({store_protocol::kSet, "a", "1"}, &reply);
  data.Apply({store_protocol::kSet, "b", "2"}, &reply);
  EXPECT_EQ(reply, std::string("\x01\x01"));
  reply.clear();
  data.Apply({store_protocol::kSet, "c", "3"}, &reply);
  ASSERT_EQ(static_cast<uint8_t>(reply[0]), store_protocol::kReplyError);
  EXPECT_EQ(reply[1], static_cast<char>(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(reply, HasSubstr("cannot add key 'c': the store holds 2 keys, the limit"));
  EXPECT_EQ(data.keys(), 2u);
  // Replacing a key is not a new key; growing it over the byte limit is refused.
  reply.clear();
  data.Apply({store_protocol::kSet, "a", std::string(18, 'x')}, &reply);
  EXPECT_THAT(reply, HasSubstr("the store would hold 21 bytes, over the limit of 20"));
  EXPECT_EQ(data.stored_bytes(), 4u);
  reply.clear();
  data.Apply({store_protocol::kAdd, "a", "5"}, &reply);
  EXPECT_EQ(reply, std::string("\x01") + Str("6"));
}

// Greets the server on a raw socket; returns the fd.
int Greeted(int port) {
  const int fd = RawConnect(port);
  const uint32_t hello[2] = {store_protocol::kMagic, store_protocol::kVersion};
  EXPECT_EQ(::send(fd, hello, sizeof(hello), MSG_NOSIGNAL), 8);
  EXPECT_EQ(::send(fd, "", 1, MSG_NOSIGNAL), 1);  // the job handshake's offer, without a secret
  uint32_t answer[2] = {0, 0};
  EXPECT_EQ(::recv(fd, answer, sizeof(answer), MSG_WAITALL), 8);
  EXPECT_EQ(answer[1], store_protocol::kVersion);
  char mode = 1;
  EXPECT_EQ(::recv(fd, &mode, 1, MSG_WAITALL), 1);
  EXPECT_EQ(mode, 0);
  return fd;
}

// Reads an error reply (kReplyError, code, message) and then EOF; returns the message.
std::string ErrorThenEof(int fd) {
  uint8_t head[2] = {0, 0};
  EXPECT_EQ(::recv(fd, head, 2, MSG_WAITALL), 2);
  EXPECT_EQ(head[0], store_protocol::kReplyError);
  uint32_t n = 0;
  EXPECT_EQ(::recv(fd, &n, 4, MSG_WAITALL), 4);
  std::string msg(std::min<uint32_t>(n, 4096), '\0');
  EXPECT_EQ(::recv(fd, msg.data(), msg.size(), MSG_WAITALL), static_cast<ssize_t>(msg.size()));
  char c = 0;
  EXPECT_EQ(::recv(fd, &c, 1, 0), 0) << "the server kept the connection open";
  return msg;
}

TEST(TcpStoreBounds, GarbageAndOversizedRequestsGetAnErrorAndOthersGoOn) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  ASSERT_TRUE(client.ok()) << client.status();

  const int garbage = Greeted(port);
  ASSERT_EQ(::send(garbage, "\x77garbage", 8, MSG_NOSIGNAL), 8);
  EXPECT_THAT(ErrorThenEof(garbage), HasSubstr("unknown request op 119"));
  ::close(garbage);

  const int oversized = Greeted(port);
  const std::string head = std::string(1, '\x01') + Str("k") + U32(0xfffffff0u);
  ASSERT_EQ(::send(oversized, head.data(), head.size(), MSG_NOSIGNAL), static_cast<ssize_t>(head.size()));
  EXPECT_THAT(ErrorThenEof(oversized), HasSubstr("value of 4294967280 bytes is over the limit of 67108864 bytes"));
  ::close(oversized);

  ASSERT_TRUE((*client)->Set("k", "v").ok());
  auto v = (*client)->Get("k", absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  // The client checks its own sizes before sending.
  absl::Status long_key = (*client)->Set(std::string(kMaxKeyBytes + 1, 'k'), "v");
  EXPECT_TRUE(absl::IsInvalidArgument(long_key)) << long_key;
  EXPECT_THAT(long_key.message(), HasSubstr("over the limit of 4096 bytes"));
}

TEST(TcpStoreBounds, KeysAndBytesOverTheLimitsAreRefusedAndTheConnectionStaysUsable) {
  StoreLimits limits;
  limits.max_keys = 3;
  limits.max_stored_bytes = 1000;
  auto server = TcpStoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ConnectTcpStore("127.0.0.1", (*server)->port(), absl::Seconds(3));
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*client)->Set(absl::StrCat("k", i), "v").ok());
  absl::Status s = (*client)->Set("k3", "v");
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("cannot add key 'k3': the store holds 3 keys, the limit"));
  s = (*client)->Set("k0", std::string(2000, 'x'));
  EXPECT_THAT(s.message(), HasSubstr("over the limit of 1000"));
  auto n = (*client)->Add("k1", 5);
  EXPECT_TRUE(n.ok()) << n.status();
  auto v = (*client)->Get("k0", absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST(TcpStoreBounds, ConnectionsOverTheLimitAreToldWhy) {
  StoreLimits limits;
  limits.max_connections = 2;
  auto server = TcpStoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  auto a = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  auto b = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("serves 2 connections at most"));
  a->reset();
  // A slot is free again once the server saw the first client go.
  absl::StatusOr<std::shared_ptr<Store>> d;
  for (int i = 0; i < 50; ++i) {
    d = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
    if (d.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE((*d)->Set("x", "y").ok());
}

TEST(TcpStoreBounds, BufferedBytesOverTheLimitRefuseTheUnfinishedRequest) {
  StoreLimits limits;
  limits.max_buffered_bytes = 256 << 10;
  auto server = TcpStoreServer::Start("127.0.0.1", 0, limits);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // A request that announces 1 MiB and sends half of it holds more than the limit.
  const int big = Greeted(port);
  std::string part = std::string(1, '\x01') + Str("k") + U32(1u << 20) + std::string(512 << 10, 'x');
  ASSERT_EQ(::send(big, part.data(), part.size(), MSG_NOSIGNAL), static_cast<ssize_t>(part.size()));
  EXPECT_THAT(ErrorThenEof(big), HasSubstr("over the limit of 262144"));
  ::close(big);
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Set("small", "v").ok());
}

}  // namespace
}  // namespace hccltune

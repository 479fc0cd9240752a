// The transports' wire bounds: a TCP link's hello is checked field by field (a hello for a lane or rank that
// does not exist is refused, not taken for a link), and a StreamEndpoint refuses a corrupt, garbage or truncated
// frame with an error naming the peer and the field.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "runtime/common/configuration.h"
#include "runtime/transport/stream_endpoint.h"
#include "runtime/transport/stream_endpoint_internal.h"
#include "runtime/transport/tcp/tcp_transport.h"
#include "tests/fuzz/scripted_pair.h"
#include "tests/unit/runtime/fault_util.h"

namespace hccltune {
namespace {

using fuzz::ScriptedPair;
using ::testing::HasSubstr;
using testing::RawConnect;

constexpr uint32_t kTcpHelloMagic = 0x48544350;  // "HTCP"

std::string Hello(uint32_t magic, uint64_t tag, int32_t rank, int32_t lane, const std::string& key,
                  uint32_t key_bytes) {
  std::string h(kTcpHelloHeadBytes, '\0');
  std::memcpy(h.data(), &magic, 4);
  std::memcpy(h.data() + 4, &tag, 8);
  std::memcpy(h.data() + 12, &rank, 4);
  std::memcpy(h.data() + 16, &lane, 4);
  std::memcpy(h.data() + 20, &key_bytes, 4);
  return h + key;
}

std::string HelloError(const std::string& head) {
  auto h = ParseTcpHelloHead(head, 42, 1, 4);
  return h.ok() ? std::string("OK") : std::string(h.status().message());
}

TEST(TcpHello, EveryFieldIsChecked) {
  EXPECT_EQ(HelloError(Hello(kTcpHelloMagic, 42, 0, 0, "", 2)), "OK");
  EXPECT_THAT(HelloError(Hello(0x12345678, 42, 0, 0, "", 2)),
              HasSubstr("not an hccl-tune TCP hello (magic 0x12345678)"));
  EXPECT_THAT(HelloError(Hello(kTcpHelloMagic, 7, 0, 0, "", 2)), HasSubstr("a hello of another communicator"));
  EXPECT_THAT(HelloError(Hello(kTcpHelloMagic, 42, 4, 0, "", 2)),
              HasSubstr("a hello from rank 4, which is not another rank of this communicator (0..3, this is 1)"));
  EXPECT_THAT(HelloError(Hello(kTcpHelloMagic, 42, -1, 0, "", 2)), HasSubstr("rank -1, which is not"));
  EXPECT_THAT(HelloError(Hello(kTcpHelloMagic, 42, 1, 0, "", 2)), HasSubstr("rank 1, which is not another rank"));
  EXPECT_THAT(HelloError(Hello(kTcpHelloMagic, 42, 0, kMaxChannels, "", 2)),
              HasSubstr(absl::StrCat("for lane ", kMaxChannels, " (lanes are 0..", kMaxChannels - 1, ")")));
  EXPECT_THAT(HelloError(Hello(kTcpHelloMagic, 42, 0, 0, "", 1u << 31)),
              HasSubstr("a key of 2147483648 bytes (the limit is 256)"));
  EXPECT_THAT(HelloError("short"), HasSubstr("a TCP hello of 5 bytes (expected 24)"));
}

// Bad hellos wait in rank 1's listen queue before rank 0's real one: each is refused, and the link rank 1 makes is
// rank 0's (before lanes were checked, a hello for lane 99 counted as the link's one lane).
TEST(TcpHello, BadHellosAreRefusedAndTheRealLinkIsMade) {
  auto d0 = TcpDomain::Create(0, 42, "", absl::Seconds(10));
  auto d1 = TcpDomain::Create(1, 42, "", absl::Seconds(10));
  ASSERT_TRUE(d0.ok() && d1.ok());
  TcpPeerInfo p0, p1;
  p0.port = (*d0)->port();
  p1.port = (*d1)->port();
  p0.same_node = p1.same_node = true;
  (*d0)->SetPeers({{1, p1}});
  (*d1)->SetPeers({{0, p0}});
  std::vector<int> bad;
  for (const std::string& h : {Hello(kTcpHelloMagic, 42, 0, 99, "#1", 2), Hello(kTcpHelloMagic, 42, 7, 0, "#1", 2),
                               Hello(kTcpHelloMagic, 42, 0, 0, "#1", 100000), std::string("GET / HTTP/1.0\r\n\r\n"),
                               Hello(kTcpHelloMagic, 42, 0, 0, "#", 2)}) {
    bad.push_back(RawConnect(p1.port));
    ASSERT_EQ(::send(bad.back(), h.data(), h.size(), MSG_NOSIGNAL), static_cast<ssize_t>(h.size()));
    ::shutdown(bad.back(), SHUT_WR);  // (a peer that says nothing more is dropped after 5 s)
  }
  auto connect0 = std::async(std::launch::async, [&] {
    absl::SleepFor(absl::Milliseconds(200));
    return (*d0)->Connect({0, 1}, "", 1);
  });
  auto pairs1 = (*d1)->Connect({0, 1}, "", 1);
  auto pairs0 = connect0.get();
  ASSERT_TRUE(pairs1.ok()) << pairs1.status();
  ASSERT_TRUE(pairs0.ok()) << pairs0.status();
  Pair* from0 = (*pairs1)[0];
  Pair* to1 = (*pairs0)[1];
  ASSERT_NE(from0, nullptr);
  ASSERT_NE(to1, nullptr);
  const char msg[] = "over the real link";
  ASSERT_EQ(*to1->TryWrite(0, msg, sizeof(msg)), sizeof(msg));
  char got[sizeof(msg)] = {};
  size_t n = 0;
  for (int i = 0; i < 1000 && n < sizeof(msg); ++i) {
    auto r = from0->TryRead(0, got + n, sizeof(msg) - n);
    ASSERT_TRUE(r.ok()) << r.status();
    n += *r;
    if (*r == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_STREQ(got, msg);
  for (int fd : bad) ::close(fd);
}

// A 64-byte allreduce receive at operation 5 from rank 1, over a link that delivers `script`.
absl::Status ReceiveFrom(const std::string& script, size_t chunk = SIZE_MAX) {
  ScriptedPair link(script, chunk);
  StreamEndpoint ep(0, {nullptr, &link}, nullptr, absl::Seconds(5));
  CallDescriptor call;
  call.sequence = 5;
  call.collective = Collective::kAllreduce;
  call.dtype = DataType::kFloat32;
  call.count = 16;
  ep.SetCall(call);
  std::vector<uint8_t> buf(64);
  return ep.Wait(ep.Irecv(1, buf.data(), buf.size()));
}

std::string Frame(uint8_t collective, uint8_t dtype, uint8_t op, uint8_t flags, size_t payload) {
  StreamEndpoint::Header h{};
  h.magic = stream_internal::kHeaderMagic;
  h.sequence = 5;
  h.bytes = 64;
  h.count = 16;
  h.collective = collective;
  h.dtype = dtype;
  h.op = op;
  h.flags = flags;
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + std::string(payload, '\x01');
}

TEST(StreamFrames, AWellFormedFrameIsReceived) { EXPECT_TRUE(ReceiveFrom(Frame(0, 6, 0, 0, 64)).ok()); }

TEST(StreamFrames, CorruptHeaderFieldsAreNamedBeforeUse) {
  EXPECT_THAT(std::string(ReceiveFrom(Frame(200, 6, 0, 0, 64)).message()),
              HasSubstr("rank 0 received a corrupt message header from rank 1: collective 200 (valid: below 12)"));
  EXPECT_THAT(std::string(ReceiveFrom(Frame(0, 99, 0, 0, 64)).message()), HasSubstr("dtype 99 (valid: below 8)"));
  EXPECT_THAT(std::string(ReceiveFrom(Frame(0, 6, 77, 0, 64)).message()), HasSubstr("reduce op 77 (valid: below 8)"));
  EXPECT_THAT(std::string(ReceiveFrom(Frame(0, 6, 0, 0x40, 64)).message()), HasSubstr("flags 64"));
  // A single-copy frame over a link that has no single-copy reads (found by the wire fuzzer).
  const uint64_t descriptor[2] = {0x1000, 64};  // address, bytes
  EXPECT_THAT(std::string(ReceiveFrom(Frame(0, 6, 0, 1, 0) +
                                      std::string(reinterpret_cast<const char*>(descriptor), sizeof(descriptor)))
                              .message()),
              HasSubstr("received a single-copy message header from rank 1 over scripted, which has no single-copy"));
  std::string garbage(96, '\xab');
  absl::Status s = ReceiveFrom(garbage);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("corrupt message header from rank 1"));
}

TEST(StreamFrames, TruncatedFramesNameThePeerThatWentAway) {
  const std::string frame = Frame(0, 6, 0, 0, 64);
  for (size_t cut : {size_t{0}, size_t{10}, sizeof(StreamEndpoint::Header), frame.size() - 1}) {
    for (size_t chunk : {size_t{1}, size_t{7}, SIZE_MAX}) {
      absl::Status s = ReceiveFrom(frame.substr(0, cut), chunk);
      EXPECT_TRUE(absl::IsUnavailable(s)) << cut << "/" << chunk << ": " << s;
      EXPECT_THAT(std::string(s.message()), HasSubstr("the peer closed the connection"));
    }
  }
}

}  // namespace
}  // namespace hccltune

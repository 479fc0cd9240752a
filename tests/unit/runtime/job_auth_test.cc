// The job handshake (runtime/common/job_auth.h): the MAC exchange (a wrong secret, a wrong nonce, a truncated
// answer, mismatched modes), where the secret and the whitelist come from, and both listeners that use it (the TCP
// store and the TCP data listener) refusing foreign connections while the job's own connect.
#include "runtime/common/job_auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <string>

#include "runtime/bootstrap/tcp_store.h"
#include "runtime/transport/tcp/tcp_transport.h"
#include "tests/unit/runtime/fault_util.h"

namespace hccltune {
namespace {

using ::testing::HasSubstr;
using testing::RawConnect;

JobAuth WithSecret(const std::string& s) {
  JobAuth a;
  a.secret = s;
  return a;
}

const JobAuth kA = WithSecret("the-job-secret-of-job-A-0123456789");
const JobAuth kB = WithSecret("the-job-secret-of-job-B-0123456789");
const JobAuth kNone;

// A handshake between `connector` and `acceptor`: the connector's error, the acceptor's, or "OK".
std::string Handshake(const JobAuth& connector, const JobAuth& acceptor, const std::string& ctx_c = "ctx",
                      const std::string& ctx_a = "ctx") {
  std::string nonce_c;
  const std::string offer = MakeOffer(connector, &nonce_c);
  AcceptorStep step = AnswerOffer(acceptor, offer, ctx_a);
  auto proof = CheckChallenge(connector, nonce_c, step.reply, ctx_c, "rank 1 at 10.0.0.2:5000");
  if (!proof.ok()) return absl::StrCat("connector: ", proof.status().message());
  if (!step.verdict.ok()) return absl::StrCat("acceptor: ", step.verdict.message());
  if (!acceptor.has_secret()) return proof->empty() ? "OK" : "a proof without a secret";
  absl::Status s = CheckProof(acceptor, offer, step.nonce_a, *proof, ctx_a);
  return s.ok() ? "OK" : absl::StrCat("acceptor: ", s.message());
}

TEST(JobHandshake, TheSameSecretOrNoneOnBothSidesSucceeds) {
  EXPECT_EQ(Handshake(kA, kA), "OK");
  EXPECT_EQ(Handshake(kNone, kNone), "OK");
}

TEST(JobHandshake, AWrongSecretIsRefusedByTheConnectorNamingThePeer) {
  EXPECT_THAT(Handshake(kA, kB), HasSubstr("connector: rank 1 at 10.0.0.2:5000 did not prove this job's secret"));
  EXPECT_THAT(Handshake(kB, kA), HasSubstr("did not prove this job's secret"));
}

TEST(JobHandshake, AnotherConnectionsContextIsRefused) {
  EXPECT_THAT(Handshake(kA, kA, "lane 0", "lane 1"), HasSubstr("connector: rank 1 at 10.0.0.2:5000 did not prove"));
}

TEST(JobHandshake, MismatchedModesNameWhatIsMissing) {
  EXPECT_THAT(Handshake(kNone, kA), HasSubstr("requires a job secret and this process has none"));
  EXPECT_THAT(Handshake(kA, kNone), HasSubstr("holds no job secret while this process has one"));
  // The acceptor's own verdict, when the connector's message is ignored: it refuses too.
  std::string nonce;
  EXPECT_THAT(std::string(AnswerOffer(kA, MakeOffer(kNone, &nonce), "c").verdict.message()),
              HasSubstr("proves no job secret"));
  EXPECT_THAT(std::string(AnswerOffer(kNone, MakeOffer(kA, &nonce), "c").verdict.message()),
              HasSubstr("holds a job secret and this rank has none"));
}

TEST(JobHandshake, AProofOverAnotherNonceIsRefused) {
  std::string nonce_c;
  const std::string offer = MakeOffer(kA, &nonce_c);
  AcceptorStep first = AnswerOffer(kA, offer, "ctx");
  AcceptorStep second = AnswerOffer(kA, offer, "ctx");  // a replay of the offer gets a fresh nonce
  ASSERT_NE(first.nonce_a, second.nonce_a);
  auto proof = CheckChallenge(kA, nonce_c, first.reply, "ctx", "peer");
  ASSERT_TRUE(proof.ok()) << proof.status();
  EXPECT_TRUE(CheckProof(kA, offer, first.nonce_a, *proof, "ctx").ok());
  EXPECT_THAT(std::string(CheckProof(kA, offer, second.nonce_a, *proof, "ctx").message()),
              HasSubstr("MAC does not match"));
  // A challenge answered for another connector nonce (a replayed challenge) fails the connector.
  std::string other_nonce;
  MakeOffer(kA, &other_nonce);
  EXPECT_THAT(std::string(CheckChallenge(kA, other_nonce, first.reply, "ctx", "peer").status().message()),
              HasSubstr("peer did not prove this job's secret"));
}

TEST(JobHandshake, TruncatedOrGarbageAnswersAreRefused) {
  std::string nonce_c;
  const std::string offer = MakeOffer(kA, &nonce_c);
  AcceptorStep step = AnswerOffer(kA, offer, "ctx");
  ASSERT_EQ(step.reply.size(), 1 + kNonceBytes + kMacBytes);
  EXPECT_THAT(std::string(CheckChallenge(kA, nonce_c, step.reply.substr(0, 40), "ctx", "peer").status().message()),
              HasSubstr("a challenge of 40 bytes (expected 65)"));
  EXPECT_THAT(std::string(CheckChallenge(kA, nonce_c, "\x07garbage", "ctx", "peer").status().message()),
              HasSubstr("not a challenge"));
  auto proof = CheckChallenge(kA, nonce_c, step.reply, "ctx", "peer");
  ASSERT_TRUE(proof.ok());
  EXPECT_FALSE(CheckProof(kA, offer, step.nonce_a, proof->substr(0, 31), "ctx").ok());
  EXPECT_FALSE(CheckProof(kA, offer, step.nonce_a, "", "ctx").ok());
  EXPECT_FALSE(AnswerOffer(kA, offer.substr(0, 10), "ctx").verdict.ok());
  EXPECT_TRUE(AnswerOffer(kA, "\x05", "ctx").reply.empty()) << "a stranger's offer gets no answer";
}

TEST(JobHandshake, MacsAreHmacSha256AndComparedWholly) {
  // RFC 4231 test case 2.
  const std::string mac = JobMac("Jefe", "what do ya want ", "for nothing?", "", "");
  const unsigned char want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_EQ(mac, std::string(reinterpret_cast<const char*>(want), sizeof(want)));
  EXPECT_TRUE(MacEquals(mac, mac));
  EXPECT_FALSE(MacEquals(mac, mac.substr(0, 31)));
  EXPECT_FALSE(MacEquals("", ""));
}

class TempFile {
 public:
  TempFile(const std::string& text, mode_t mode) {
    char tmpl[] = "/tmp/hccltune-job-auth-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    path_ = tmpl;
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::fchmod(fd, mode);
    ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(JobSecretFile, ModeMustBe0600OrStricter) {
  TempFile open_file("0123456789abcdef0123\n", 0644);
  auto s = ReadJobSecretFile(open_file.path());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr(absl::StrCat("HCCL_TUNE_JOB_SECRET_FILE=", open_file.path(), ": mode 0644")));
  TempFile good("0123456789abcdef0123\n", 0600);
  auto g = ReadJobSecretFile(good.path());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, "0123456789abcdef0123") << "the trailing newline is not part of the secret";
  TempFile short_secret("short\n", 0400);
  EXPECT_THAT(std::string(ReadJobSecretFile(short_secret.path()).status().message()),
              HasSubstr("a job secret of 5 characters; at least 16"));
  EXPECT_THAT(std::string(ReadJobSecretFile("/nonexistent/secret").status().message()),
              HasSubstr("HCCL_TUNE_JOB_SECRET_FILE=/nonexistent/secret: cannot open"));
}

TEST(JobAuthEnvironment, VariablesAreCheckedAndLoaded) {
  EXPECT_THAT(std::string(Environment::LoadFrom({{"HCCL_TUNE_JOB_SECRET", "x"}, {"HCCL_TUNE_JOB_SECRET_FILE", "/f"}})
                              .status()
                              .message()),
              HasSubstr("both set"));
  EXPECT_THAT(std::string(Environment::LoadFrom({{"HCCL_WHITELIST_DISABLE", "0"}}).status().message()),
              HasSubstr("needs HCCL_WHITELIST_FILE"));
  EXPECT_THAT(std::string(Environment::LoadFrom({{"HCCL_WHITELIST_DISABLE", "2"}}).status().message()),
              HasSubstr("HCCL_WHITELIST_DISABLE"));
  auto env = Environment::LoadFrom({{"HCCL_TUNE_JOB_SECRET", "0123456789abcdef-x"}});
  ASSERT_TRUE(env.ok());
  auto auth = LoadJobAuth(*env);
  ASSERT_TRUE(auth.ok());
  EXPECT_EQ(auth->secret, "0123456789abcdef-x");
  EXPECT_FALSE(auth->whitelist.has_value()) << "HCCL_WHITELIST_DISABLE defaults to 1 (off), as in HCCL";

  TempFile list(R"({"host_ip": ["10.0.0.1", "127.0.0.1"], "device_ip": []})", 0644);
  env = Environment::LoadFrom({{"HCCL_WHITELIST_DISABLE", "0"}, {"HCCL_WHITELIST_FILE", list.path()}});
  ASSERT_TRUE(env.ok());
  auth = LoadJobAuth(*env);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE(auth->Whitelisted("127.0.0.1"));
  EXPECT_FALSE(auth->Whitelisted("10.0.0.2"));
  env = Environment::LoadFrom({{"HCCL_WHITELIST_FILE", list.path()}});
  EXPECT_FALSE(LoadJobAuth(*env)->whitelist.has_value()) << "a file alone does not turn the whitelist on";

  TempFile bad(R"({"host_ip": ["10.0.0.300"]})", 0644);
  EXPECT_THAT(std::string(ReadWhitelistFile(bad.path()).status().message()),
              HasSubstr("host_ip entry \"10.0.0.300\" is not a dotted-decimal IPv4 address"));
  TempFile not_json("10.0.0.1\n", 0644);
  EXPECT_THAT(std::string(ReadWhitelistFile(not_json.path()).status().message()), HasSubstr("expected {\"host_ip\""));
}

TEST(RefusalLog, EachAddressIsLoggedOnce) {
  EXPECT_TRUE(NoteRefusal("test listener", "198.51.100.7", "a test"));
  EXPECT_FALSE(NoteRefusal("test listener", "198.51.100.7", "a test"));
  EXPECT_TRUE(NoteRefusal("test listener", "198.51.100.8", "a test"));
}

// Sends `bytes` on a fresh connection to `port` and returns whether the listener closed it (EOF or reset) within
// `wait`.
bool ClosedAfter(int port, const std::string& bytes, absl::Duration wait) {
  const int fd = RawConnect(port);
  if (!bytes.empty()) (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  const timeval tv{static_cast<time_t>(absl::ToInt64Seconds(wait)), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  ssize_t r = 0;
  while ((r = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  ::close(fd);
  return r == 0 || (r < 0 && errno == ECONNRESET);
}

TEST(TcpStoreHandshake, ForeignConnectionsAreRefusedWhileTheJobsClientsAreServed) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0, {}, kA);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  std::string hello(reinterpret_cast<const char*>(&store_protocol::kMagic), 4);
  hello.append(reinterpret_cast<const char*>(&store_protocol::kVersion), 4);
  // A wrong MAC: a well-formed offer, then 32 bytes that are not the proof.
  std::string nonce;
  auto wrong_mac = std::async(std::launch::async, [&] {
    return ClosedAfter(port, hello + MakeOffer(kA, &nonce) + std::string(kMacBytes, 'x'), absl::Seconds(3));
  });
  auto garbage =
      std::async(std::launch::async, [&] { return ClosedAfter(port, "GET / HTTP/1.0\r\n\r\n", absl::Seconds(3)); });
  auto silent = std::async(std::launch::async, [&] { return ClosedAfter(port, "", absl::Seconds(8)); });
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3), kA);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
  EXPECT_EQ(*(*client)->Get("k", absl::Seconds(1)), "v");
  EXPECT_TRUE(wrong_mac.get()) << "a wrong MAC was not refused";
  EXPECT_TRUE(garbage.get()) << "garbage was not refused";
  EXPECT_TRUE(silent.get()) << "a silent connection was not dropped at the handshake deadline";
  EXPECT_EQ(*(*client)->Add("n", 2), 2) << "the job's client is still served";

  auto other = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3), kB);
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.status().message()),
              HasSubstr(absl::StrCat("the rendezvous server at 127.0.0.1:", port, " did not prove this job's secret")));
  auto none = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3), kNone);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("requires a job secret and this process has none"));
}

TEST(TcpStoreHandshake, TheWhitelistDecidesWhoIsServed) {
  JobAuth listed = kA, unlisted = kA;
  listed.whitelist = std::vector<std::string>{"127.0.0.1"};
  unlisted.whitelist = std::vector<std::string>{"192.0.2.77"};
  unlisted.whitelist_file = "/etc/whitelist.json";
  auto ok_server = TcpStoreServer::Start("127.0.0.1", 0, {}, listed);
  auto no_server = TcpStoreServer::Start("127.0.0.1", 0, {}, unlisted);
  ASSERT_TRUE(ok_server.ok() && no_server.ok());
  EXPECT_TRUE(ConnectTcpStore("127.0.0.1", (*ok_server)->port(), absl::Seconds(3), kA).ok());
  auto refused = ConnectTcpStore("127.0.0.1", (*no_server)->port(), absl::Seconds(3), kA);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("closed the connection without answering"));
}

// Two TCP domains (ranks 0 and 1 of one communicator) with the given secrets; Connect's results.
std::pair<absl::Status, absl::Status> ConnectPair(const JobAuth& a0, const JobAuth& a1, int* port1 = nullptr,
                                                  std::function<void(int)> meanwhile = {}) {
  auto d0 = TcpDomain::Create(0, 42, "", absl::Seconds(3), {}, a0);
  auto d1 = TcpDomain::Create(1, 42, "", absl::Seconds(3), {}, a1);
  if (!d0.ok() || !d1.ok()) return {d0.status(), d1.status()};
  TcpPeerInfo p0, p1;
  p0.port = (*d0)->port();
  p1.port = (*d1)->port();
  if (port1 != nullptr) *port1 = p1.port;
  p0.same_node = p1.same_node = true;
  (*d0)->SetPeers({{1, p1}});
  (*d1)->SetPeers({{0, p0}});
  if (meanwhile) meanwhile(p1.port);
  auto c0 = std::async(std::launch::async, [&] { return (*d0)->Connect({0, 1}, "", 2).status(); });
  absl::Status s1 = (*d1)->Connect({0, 1}, "", 2).status();
  return {c0.get(), s1};
}

TEST(TcpHandshake, RanksWithTheSameSecretConnectAndForeignConnectionsAreRefused) {
  std::vector<std::future<bool>> foreign;
  auto [s0, s1] = ConnectPair(kA, kA, nullptr, [&](int port) {
    std::string hello(24, '\0');
    const uint32_t magic = 0x48544350, klen = 2;
    const uint64_t tag = 42;
    std::memcpy(hello.data(), &magic, 4);
    std::memcpy(hello.data() + 4, &tag, 8);
    std::memcpy(hello.data() + 20, &klen, 4);  // rank 0, lane 0, the key "#2" (the default network, 2 channels)
    std::string nonce;
    const std::string offer = hello + "#2" + MakeOffer(kA, &nonce);
    foreign.push_back(std::async(
        std::launch::async, [=] { return ClosedAfter(port, offer + std::string(kMacBytes, 'x'), absl::Seconds(3)); }));
    foreign.push_back(std::async(std::launch::async, [=] {
      return ClosedAfter(port, "GET / HTTP/1.0\r\nHost: rank\r\n\r\n", absl::Seconds(3));
    }));
  });
  EXPECT_TRUE(s0.ok()) << s0;
  EXPECT_TRUE(s1.ok()) << s1;
  for (auto& f : foreign) EXPECT_TRUE(f.get());
}

TEST(TcpHandshake, DifferentSecretsFailNamingThePeer) {
  int port1 = 0;
  auto [s0, s1] = ConnectPair(kA, kB, &port1);
  ASSERT_FALSE(s0.ok());
  EXPECT_THAT(std::string(s0.message()),
              HasSubstr(absl::StrCat("rank 0: rank 1 at 127.0.0.1:", port1, " did not prove this job's secret")));
  EXPECT_FALSE(s1.ok()) << "rank 1 refused rank 0 and never got its link";
  auto [n0, n1] = ConnectPair(kNone, kA, &port1);
  EXPECT_THAT(std::string(n0.message()),
              HasSubstr(absl::StrCat("rank 1 at 127.0.0.1:", port1, " requires a job secret")));
}

}  // namespace
}  // namespace hccltune

// Bootstrap: the TCP rendezvous server under idle and half-talking clients, connects bounded by their deadline,
// port ranges, reused stores (two jobs over one file store directory), errors that name the real cause (a lost
// store, another rank's abort while this one waits for TCP connections), and Split behind queued work.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/api/communicator.h"
#include "runtime/bootstrap/store.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/transport/tcp/tcp_transport.h"
#include "tests/unit/runtime/fault_util.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

using testing::Contains;
using testing::RawConnect;
using testing::RunRanks;
using testing::TestEnv;

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs the destructor of `server` on another thread; true when it returned within `limit`. Otherwise the
// sockets in `unblock` are closed (so the test ends instead of hanging) and false is returned.
bool DestroyedWithin(std::unique_ptr<TcpStoreServer> server, absl::Duration limit, std::vector<int>& unblock) {
  auto done = std::async(std::launch::async, [s = std::move(server)]() mutable { s.reset(); });
  const bool in_time = done.wait_for(absl::ToChronoMilliseconds(limit)) == std::future_status::ready;
  for (int fd : unblock) ::close(fd);
  unblock.clear();
  done.wait();
  return in_time;
}

TEST(TcpStore, IdleConnectionDoesNotStallOtherClientsOrTheDestructor) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // One connection that never says a word, one that sends half a hello.
  std::vector<int> idle = {RawConnect(port), RawConnect(port)};
  const uint32_t magic = 0x48545354;
  ASSERT_EQ(::send(idle[1], &magic, 2, MSG_NOSIGNAL), 2);
  absl::SleepFor(absl::Milliseconds(100));  // the server has accepted them

  const auto t0 = std::chrono::steady_clock::now();
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Set("k", "v").ok());
  auto v = (*client)->Get("k", absl::Seconds(1));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
  EXPECT_LT(SecondsSince(t0), 1.0) << "a client waited behind the idle connections";

  client->reset();
  EXPECT_TRUE(DestroyedWithin(*std::move(server), absl::Seconds(3), idle))
      << "the server's destructor waited for an idle client";
}

TEST(TcpStore, HalfSentRequestDoesNotStallOtherClients) {
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  // A client that greets properly, then stalls in the middle of a Set (op, half of the key's length).
  std::vector<int> stalled = {RawConnect(port)};
  // The hello: magic, version, and the job handshake's offer without a secret (mode 0).
  const uint32_t hello[2] = {0x48545354, store_protocol::kVersion};
  ASSERT_EQ(::send(stalled[0], hello, sizeof(hello), MSG_NOSIGNAL), 8);
  ASSERT_EQ(::send(stalled[0], "", 1, MSG_NOSIGNAL), 1);
  uint32_t answer[2] = {0, 0};
  ASSERT_EQ(::recv(stalled[0], answer, sizeof(answer), MSG_WAITALL), 8);
  EXPECT_EQ(answer[0], hello[0]);
  char mode = 1;
  ASSERT_EQ(::recv(stalled[0], &mode, 1, MSG_WAITALL), 1);
  EXPECT_EQ(mode, 0) << "the server holds no secret";
  const char partial[3] = {1, 5, 0};
  ASSERT_EQ(::send(stalled[0], partial, sizeof(partial), MSG_NOSIGNAL), 3);
  absl::SleepFor(absl::Milliseconds(100));

  const auto t0 = std::chrono::steady_clock::now();
  auto client = ConnectTcpStore("127.0.0.1", port, absl::Seconds(3));
  ASSERT_TRUE(client.ok()) << client.status();
  auto n = (*client)->Add("counter", 3);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3);
  EXPECT_LT(SecondsSince(t0), 1.0);

  // The stalled client finishes its request later and is answered.
  std::string rest;
  rest.append(std::string(2, '\0'));  // the key length's other two bytes (5)
  rest.append("hello");
  const uint32_t vlen = 1;
  rest.append(reinterpret_cast<const char*>(&vlen), 4);
  rest.append("x");
  ASSERT_EQ(::send(stalled[0], rest.data(), rest.size(), MSG_NOSIGNAL), static_cast<ssize_t>(rest.size()));
  char ok = 0;
  ASSERT_EQ(::recv(stalled[0], &ok, 1, MSG_WAITALL), 1);
  EXPECT_EQ(ok, 1);
  auto got = (*client)->Get("hello", absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "x");

  client->reset();
  EXPECT_TRUE(DestroyedWithin(*std::move(server), absl::Seconds(3), stalled));
}

TEST(TcpStore, PortsOutOfRangeAreRefused) {
  for (int port : {-1, 65536, 99999}) {
    auto server = TcpStoreServer::Start("127.0.0.1", port);
    ASSERT_FALSE(server.ok()) << port << " listened on " << (*server)->port();
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(server.status(), absl::StrCat(port))) << server.status();
  }
  for (int port : {0, 65536, 99999}) {
    auto client = ConnectTcpStore("127.0.0.1", port, absl::Milliseconds(200));
    ASSERT_FALSE(client.ok()) << port;
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << client.status();
  }
}

// A listener whose accept queue is full: the kernel drops further SYNs, as a host that silently drops packets
// does, so a blocking connect() would wait for the SYN retries (about 2 minutes).
struct FullListener {
  int fd = -1;
  int port = 0;
  std::vector<int> fillers;
  FullListener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
    EXPECT_EQ(::listen(fd, 0), 0);
    socklen_t len = sizeof(sa);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
    for (int i = 0; i < 4; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      (void)::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
      fillers.push_back(c);
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  ~FullListener() {
    for (int c : fillers) ::close(c);
    ::close(fd);
  }
};

TEST(TcpStore, ConnectGivesUpAtItsTimeoutWhenSynsAreDropped) {
  FullListener full;
  const auto t0 = std::chrono::steady_clock::now();
  auto client = ConnectTcpStore("127.0.0.1", full.port, absl::Seconds(1));
  EXPECT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kDeadlineExceeded) << client.status();
  EXPECT_LT(SecondsSince(t0), 5.0);
}

TEST(TcpTransport, ConnectGivesUpAtHcclConnectTimeoutWhenSynsAreDropped) {
  FullListener full;
  auto domain = TcpDomain::Create(0, 42, "", absl::Seconds(1));
  ASSERT_TRUE(domain.ok()) << domain.status();
  TcpPeerInfo peer;
  peer.port = full.port;
  peer.same_node = true;  // 127.0.0.1
  (*domain)->SetPeers({{1, peer}});
  const auto t0 = std::chrono::steady_clock::now();
  auto pairs = (*domain)->Connect({0, 1}, "", 1);
  ASSERT_FALSE(pairs.ok());
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kDeadlineExceeded) << pairs.status();
  EXPECT_TRUE(Contains(pairs.status(), "cannot connect to rank 1")) << pairs.status();
  EXPECT_LT(SecondsSince(t0), 5.0);
}

TEST(Bootstrap, PortsOutOfRangeNameTheVariable) {
  Environment env = TestEnv();
  env.rank = 0;
  env.world_size = 1;
  env.launcher_master_addr = "127.0.0.1";
  env.launcher_master_port = 65535;  // hccl-tune would listen on 65536
  auto c = Communicator::FromEnvironment(env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(c.status(), "MASTER_PORT=65535")) << c.status();

  env.store = "tcp://127.0.0.1:99999";
  c = Communicator::FromEnvironment(env);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(Contains(c.status(), "HCCL_TUNE_STORE='tcp://127.0.0.1:99999'")) << c.status();
  EXPECT_TRUE(Contains(c.status(), "1 to 65535")) << c.status();
}

// One job of `n` ranks (threads) over `store`: rank r starts after delay_ms[r], runs an allreduce, checks it.
std::vector<absl::Status> Job(std::shared_ptr<Store> store, int n, std::vector<int> delay_ms, int timeout_s = 20) {
  std::vector<absl::Status> st(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::SleepFor(absl::Milliseconds(delay_ms[static_cast<size_t>(r)]));
      Environment env = TestEnv();
      env.connect_timeout_s = timeout_s;
      auto comm = Communicator::Create(r, n, store, env);
      if (!comm.ok()) {
        st[static_cast<size_t>(r)] = comm.status();
        return;
      }
      std::vector<float> buf(1000, static_cast<float>(r + 1));
      absl::Status s = (*comm)->Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
      if (s.ok() && buf[999] != static_cast<float>(n * (n + 1) / 2)) s = absl::InternalError("wrong sum");
      st[static_cast<size_t>(r)] = s;
    });
  }
  for (auto& t : threads) t.join();
  return st;
}

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/hccltune-boot-XXXXXX";
    path_ = ::mkdtemp(dir);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Bootstrap, TwoJobsOverOneStoreTheSecondWithRankOneFirst) {
  TempDir dir;
  auto file = NewFileStore(dir.path());
  ASSERT_TRUE(file.ok());
  for (std::shared_ptr<Store> store : {*file, NewMemoryStore()}) {
    SCOPED_TRACE(store->Describe());
    for (const absl::Status& s : Job(store, 2, {0, 0})) ASSERT_TRUE(s.ok()) << s;
    // The first job's last words: an abort under its tag must not reach the next job.
    auto tag = store->Get("hccltune/world/tag", absl::Seconds(1));
    ASSERT_TRUE(tag.ok());
    uint64_t t = 0;
    ASSERT_TRUE(absl::SimpleAtoi(*tag, &t));
    ASSERT_TRUE(store->Set(absl::StrCat("hccltune/world/job-", absl::Hex(t), "/abort"), "rank 0 aborted").ok());
    // Rank 1 first: it finds the first job's tag, info and shm names.
    for (const absl::Status& s : Job(store, 2, {500, 0})) EXPECT_TRUE(s.ok()) << s;
    for (const absl::Status& s : Job(store, 3, {300, 0, 100})) EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(Bootstrap, StaleDataWithoutANewRankZeroIsNamed) {
  TempDir dir;
  auto store = NewFileStore(dir.path());
  ASSERT_TRUE(store.ok());
  for (const absl::Status& s : Job(*store, 2, {0, 0})) ASSERT_TRUE(s.ok()) << s;
  // Only rank 1 of the next job comes.
  Environment env = TestEnv();
  env.connect_timeout_s = 2;
  const auto t0 = std::chrono::steady_clock::now();
  auto comm = Communicator::Create(1, 2, *store, env);
  ASSERT_FALSE(comm.ok());
  EXPECT_TRUE(Contains(comm.status(), absl::StrCat("stale rendezvous data in file store ", dir.path())))
      << comm.status();
  EXPECT_TRUE(Contains(comm.status(), "from an earlier job")) << comm.status();
  EXPECT_LT(SecondsSince(t0), 6.0);
}

// A store that works until the ranks wait for each other's info, then reports a lost connection.
class LosesConnection final : public Store {
 public:
  absl::Status Set(const std::string& k, const std::string& v) override { return base_->Set(k, v); }
  absl::StatusOr<std::string> Get(const std::string& k, absl::Duration t) override { return base_->Get(k, t); }
  absl::StatusOr<int64_t> Add(const std::string& k, int64_t d) override { return base_->Add(k, d); }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) {
      if (k.find("/info/") != std::string::npos) return Lost();
    }
    return base_->Check(keys);
  }
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration t) override {
    auto ok = Check(keys);
    if (!ok.ok()) return ok.status();
    return base_->Wait(keys, t);
  }

 private:
  static absl::Status Lost() { return absl::UnavailableError("tcp store: lost the connection to the server"); }
  std::shared_ptr<Store> base_ = NewMemoryStore();
};

TEST(Bootstrap, StoreFailuresAreNotReportedAsMissingRanks) {
  Environment env = TestEnv();
  env.connect_timeout_s = 5;
  const auto t0 = std::chrono::steady_clock::now();
  auto c = Communicator::Create(0, 2, std::make_shared<LosesConnection>(), env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_TRUE(Contains(c.status(), "lost the connection")) << c.status();
  EXPECT_FALSE(Contains(c.status(), "never joined")) << c.status();
  EXPECT_LT(SecondsSince(t0), 3.0);

  // A real tcp store whose server is gone: rank 1 says so rather than "rank 0 never arrived".
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto client = ConnectTcpStore("127.0.0.1", (*server)->port(), absl::Seconds(2));
  ASSERT_TRUE(client.ok());
  server->reset();
  c = Communicator::Create(1, 2, *client, env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_TRUE(Contains(c.status(), "lost the connection to the rendezvous server")) << c.status();
}

TEST(Bootstrap, RankWaitingForTcpConnectionsReportsAnotherRanksFailure) {
  // Rank 0 calls an allreduce over shm and gives up after its 1 s HCCL_EXEC_TIMEOUT (rank 1 never sends there),
  // posting an abort; rank 1, which called it over tcp and only accepts connections from lower ranks, must
  // report that abort well before its HCCL_CONNECT_TIMEOUT (20 s).
  std::vector<double> took(2);
  auto st = RunRanks(
      2,
      [&](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> buf(256, 1.0f);
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s = comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum,
                                        {rank == 0 ? "ring(link=shm)" : "ring(link=tcp)"});
        took[static_cast<size_t>(rank)] = SecondsSince(t0);
        return s;
      },
      [](int rank) {
        Environment e = TestEnv();
        if (rank == 0) e.exec_timeout_s = 1;
        return e;
      });
  ASSERT_FALSE(st[0].ok());
  EXPECT_EQ(st[0].code(), absl::StatusCode::kDeadlineExceeded) << st[0];
  ASSERT_FALSE(st[1].ok());
  EXPECT_EQ(st[1].code(), absl::StatusCode::kAborted) << st[1];
  EXPECT_TRUE(Contains(st[1], "rank 0 aborted allreduce")) << st[1];
  EXPECT_LT(took[1], 5.0) << st[1];
}

TEST(Bootstrap, ARankWhoseSetupFailsTellsTheOthers) {
  // Rank 0 cannot set up (HCCL_SOCKET_IFNAME names no interface); rank 1 learns why — at once when it is already
  // waiting for the others, at its HCCL_CONNECT_TIMEOUT when it arrives after the announcement (the tag is then
  // over, and a restarted rank 0 would publish a new one) — instead of "rank 0 never joined".
  auto st = RunRanks(
      2, [&](int, Communicator&) -> absl::Status { return absl::OkStatus(); },
      [&](int rank) {
        Environment e = TestEnv();
        e.connect_timeout_s = 5;  // rank 1 may join after the announcement: it then waits for a new tag this long
        if (rank == 0) e.socket_ifname = "hccltune-none0";
        return e;
      });
  ASSERT_FALSE(st[0].ok());
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument) << st[0];
  EXPECT_TRUE(Contains(st[0], "HCCL_SOCKET_IFNAME='hccltune-none0'")) << st[0];
  ASSERT_FALSE(st[1].ok());
  EXPECT_EQ(st[1].code(), absl::StatusCode::kAborted) << st[1];
  EXPECT_TRUE(Contains(st[1], "rank 0 could not set up the communicator")) << st[1];
  EXPECT_TRUE(Contains(st[1], "hccltune-none0")) << st[1];
}

TEST(Bootstrap, SplitWaitsBehindQueuedWork) {
  auto st = RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::atomic<bool> done{false};
    auto work = comm.Enqueue([&done](Communicator&) {
      absl::SleepFor(absl::Milliseconds(1500));
      done = true;
      return absl::OkStatus();
    });
    auto sub = comm.Split(0, rank);
    if (!done) return absl::InternalError("Split returned before the work queued ahead of it ran");
    if (!sub.ok()) return sub.status();
    if (absl::Status s = work->Wait(); !s.ok()) return s;
    if ((*sub)->rank() != rank || (*sub)->size() != 2) return absl::InternalError("wrong sub-communicator");
    int x = 1;
    if (absl::Status s = (*sub)->Allreduce(&x, &x, 1, DataType::kInt32, ReduceOp::kSum); !s.ok()) return s;
    return x == 2 ? absl::OkStatus() : absl::InternalError("wrong sum on the sub-communicator");
  });
  for (const absl::Status& s : st) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace hccltune

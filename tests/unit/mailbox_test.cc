// StreamEndpoint::Exchange over the shm mailbox (runtime/transport/mailbox.h), ranks as threads: every rank's
// blocks across many exchanges (both slots reused, block sizes up to the capacity), endpoints sharing the
// mailbox, mismatched calls, stray ring messages, timeouts and a sleeping rank woken by a post.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/unit/shm_fixture.h"

namespace hccltune {
namespace {

using namespace shmtest;  // NOLINT(build/namespaces): the shm fixture helpers

std::vector<std::unique_ptr<StreamEndpoint>> MailboxEndpoints(std::vector<std::unique_ptr<ShmDomain>>& doms,
                                                              absl::Duration timeout = absl::Seconds(20)) {
  auto eps = Endpoints(doms);
  for (size_t r = 0; r < eps.size(); ++r) {
    eps[r]->SetTimeout(timeout);
    eps[r]->SetMailbox(doms[r]->mailbox());
  }
  return eps;
}

uint8_t Pattern(int rank, int round, size_t i) { return static_cast<uint8_t>(rank * 37 + round * 11 + i * 7 + 1); }

// Runs `rounds` exchanges on every rank at once; round k uses endpoint set k % sets and sizes[k % sizes]; every
// rank checks every block it got (its own included) before its next exchange.
void RunExchanges(std::vector<std::vector<std::unique_ptr<StreamEndpoint>>>& sets, int rounds,
                  const std::vector<size_t>& sizes) {
  const int n = static_cast<int>(sets[0].size());
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<const void*> blocks(static_cast<size_t>(n));
      std::vector<uint8_t> mine;
      for (int k = 0; k < rounds && errors[static_cast<size_t>(r)].empty(); ++k) {
        StreamEndpoint& ep = *sets[static_cast<size_t>(k) % sets.size()][static_cast<size_t>(r)];
        const size_t bytes = sizes[static_cast<size_t>(k) % sizes.size()];
        mine.resize(bytes);
        for (size_t i = 0; i < bytes; ++i) mine[i] = Pattern(r, k, i);
        ep.SetCall({static_cast<uint32_t>(k), Collective::kAllgather, DataType::kUint8, ReduceOp::kSum, bytes, 0});
        if (absl::Status s = ep.Exchange(mine.data(), bytes, blocks.data()); !s.ok()) {
          errors[static_cast<size_t>(r)] = std::string(s.message());
          return;
        }
        std::fill(mine.begin(), mine.end(), uint8_t{0});  // the own block is a copy
        for (int q = 0; q < n; ++q) {
          const auto* b = static_cast<const uint8_t*>(blocks[static_cast<size_t>(q)]);
          for (size_t i = 0; i < bytes; ++i) {
            if (b[i] != Pattern(q, k, i)) {
              errors[static_cast<size_t>(r)] =
                  absl::StrCat("rank ", r, " round ", k, ": rank ", q, "'s byte ", i, " is ", b[i]);
              return;
            }
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

TEST(ShmMailbox, EveryRankGetsEveryBlock) {
  for (int n : {2, 3, 4}) {
    auto doms = MakeShm(n, 4096);
    std::vector<std::vector<std::unique_ptr<StreamEndpoint>>> sets;
    sets.push_back(MailboxEndpoints(doms));
    const size_t cap = sets[0][0]->ExchangeCapacity();
    ASSERT_GE(cap, size_t{16} << 10);
    RunExchanges(sets, 300, {8, 0, 24, 25, 1000, 4096, cap, 1});
    EXPECT_EQ(sets[0][0]->stats().exchanges, 300u);
    EXPECT_EQ(sets[0][0]->stats().sends, 0u);  // no message at all
  }
}

// Two endpoints per rank over one mailbox (a communicator's endpoints for link=auto and link=shm) take turns:
// the exchange numbers come from the mailbox, so neither reads a block of the other's last exchange.
TEST(ShmMailbox, EndpointsShareTheNumbers) {
  auto doms = MakeShm(3, 4096);
  std::vector<std::vector<std::unique_ptr<StreamEndpoint>>> sets;
  sets.push_back(MailboxEndpoints(doms));
  sets.push_back(MailboxEndpoints(doms));
  RunExchanges(sets, 101, {16, 3000, 16});
  EXPECT_EQ(sets[0][1]->stats().exchanges + sets[1][1]->stats().exchanges, 101u);
}

TEST(ShmMailbox, NoMailboxNoExchange) {
  auto doms = MakeShm(2, 4096);
  auto eps = Endpoints(doms);
  EXPECT_EQ(eps[0]->ExchangeCapacity(), 0u);
  const void* blocks[2];
  EXPECT_FALSE(eps[0]->Exchange(nullptr, 0, blocks).ok());
}

TEST(ShmMailbox, MismatchedCountsAreNamed) {
  auto doms = MakeShm(2, 4096);
  auto eps = MailboxEndpoints(doms, absl::Seconds(5));
  absl::Status st[2];
  std::vector<std::thread> t;
  for (int r = 0; r < 2; ++r) {
    t.emplace_back([&, r] {
      const uint64_t count = r == 0 ? 1000 : 1024;
      eps[static_cast<size_t>(r)]->SetCall({7, Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, count, 0});
      std::vector<float> x(count);
      const void* blocks[2];
      st[r] = eps[static_cast<size_t>(r)]->Exchange(x.data(), 8, blocks);
    });
  }
  for (auto& th : t) th.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find("called allreduce with"), std::string::npos) << st[r];
  }
  // The mailbox is broken for good: the ranks may now disagree on the exchange numbers.
  const void* blocks[2];
  EXPECT_FALSE(eps[0]->Exchange(nullptr, 0, blocks).ok());
}

TEST(ShmMailbox, TimeoutNamesThePeer) {
  auto doms = MakeShm(3, 4096);
  auto eps = MailboxEndpoints(doms, absl::Milliseconds(300));
  std::thread other([&] {
    const void* blocks[3];
    eps[2]->SetCall({1, Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0});
    (void)eps[2]->Exchange(nullptr, 0, blocks);  // rank 0 never comes: times out too
  });
  const void* blocks[3];
  eps[1]->SetCall({1, Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0});
  const absl::Time t0 = absl::Now();
  absl::Status s = eps[1]->Exchange(nullptr, 0, blocks);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  other.join();
  ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("for rank 0 to post"), std::string::npos) << s;
}

// A message nobody received (rank 0 sent it in a call where rank 1 expected none) is found by rank 1's next
// exchange, which reads no ring, and named by its call.
TEST(ShmMailbox, StrayMessageIsNamed) {
  auto doms = MakeShm(2, 4096);
  auto eps = MailboxEndpoints(doms, absl::Seconds(5));
  eps[0]->SetCall({3, Collective::kBroadcast, DataType::kInt32, ReduceOp::kSum, 4, 0});
  int32_t v[4] = {1, 2, 3, 4};
  ASSERT_TRUE(eps[0]->Send(1, v, sizeof(v)).ok());
  eps[1]->SetCall({4, Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0});
  const void* blocks[2];
  absl::Status s = eps[1]->Exchange(nullptr, 0, blocks);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 0 is at operation 3 (broadcast, root 0)"), std::string::npos) << s;
}

// A late rank posts, finds every block there, and goes straight on to a call that sends a message, while the
// other rank sleeps on its doorbell: the exchange completes and the message belongs to the next call. (Whether the
// sleeper's 50 ms liveness check runs between the post and the message is up to the timing; when it does, the
// message must not be taken for a stray — the slot is read again after the ring.)
TEST(ShmMailbox, LateRankThatMovesOnIsNotAStray) {
  auto doms = MakeShm(2, 4096);
  auto eps = MailboxEndpoints(doms);
  for (int trial = 0; trial < 3; ++trial) {
    const uint32_t call = static_cast<uint32_t>(2 * trial);
    std::thread late([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(120));  // past two 50 ms slices of blocking
      const void* blocks[2];
      eps[0]->SetCall({call, Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0});
      EXPECT_TRUE(eps[0]->Exchange(nullptr, 0, blocks).ok());
      eps[0]->SetCall({call + 1, Collective::kBroadcast, DataType::kInt32, ReduceOp::kSum, 1, 0});
      const int32_t v = 5;
      EXPECT_TRUE(eps[0]->Send(1, &v, sizeof(v)).ok());
    });
    const void* blocks[2];
    eps[1]->SetCall({call, Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0});
    absl::Status s = eps[1]->Exchange(nullptr, 0, blocks);
    late.join();
    ASSERT_TRUE(s.ok()) << s;
    eps[1]->SetCall({call + 1, Collective::kBroadcast, DataType::kInt32, ReduceOp::kSum, 1, 0});
    int32_t got = 0;
    ASSERT_TRUE(eps[1]->Recv(0, &got, sizeof(got)).ok());
    EXPECT_EQ(got, 5);
  }
}

// A rank whose peer is late goes to sleep on its doorbell; the peer's post wakes it (not its next 50 ms slice).
TEST(ShmMailbox, SleepingRankIsWokenByPost) {
  auto doms = MakeShm(2, 4096);
  auto eps = MailboxEndpoints(doms);
  std::vector<double> late_ms;
  for (int trial = 0; trial < 9; ++trial) {
    std::atomic<int64_t> post_ns{0};
    std::thread late([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const void* blocks[2];
      const uint64_t x = 42;
      post_ns = std::chrono::steady_clock::now().time_since_epoch().count();
      EXPECT_TRUE(eps[0]->Exchange(&x, sizeof(x), blocks).ok());
    });
    const void* blocks[2];
    const uint64_t y = 7;
    ASSERT_TRUE(eps[1]->Exchange(&y, sizeof(y), blocks).ok());
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    uint64_t got = 0;
    std::memcpy(&got, blocks[0], sizeof(got));
    late.join();
    EXPECT_EQ(got, 42u);
    late_ms.push_back(static_cast<double>(now - post_ns.load()) / 1e6);
  }
  std::sort(late_ms.begin(), late_ms.end());
  EXPECT_LT(late_ms[late_ms.size() / 2], 10.0) << "median wake-up after the post, ms";
}

}  // namespace
}  // namespace hccltune

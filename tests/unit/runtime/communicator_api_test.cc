// Communicator behaviour around the collectives: bad input, mismatched calls, timeouts, split, non-blocking
// calls, point-to-point, setup checks, timing sink.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "runtime/transport/tcp/tcp_transport.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

using testing::Contains;
using testing::RunRanks;
using testing::TestEnv;

TEST(CommunicatorApi, MismatchedCountsAreNamed) {
  auto st = RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> buf(1024);
    return comm.Allreduce(buf.data(), buf.data(), rank == 0 ? 1024 : 1000, DataType::kFloat32, ReduceOp::kSum,
                          {"ring"});
  });
  // Whichever rank detects it names both ranks and both counts.
  bool named = false;
  for (const auto& s : st) {
    ASSERT_FALSE(s.ok());
    named = named || (Contains(s, "rank 0 called allreduce with 1024 elements, rank 1 with 1000") ||
                      Contains(s, "rank 1 called allreduce with 1000 elements, rank 0 with 1024"));
  }
  EXPECT_TRUE(named) << st[0] << " / " << st[1];
}

TEST(CommunicatorApi, MismatchedRootIsNamed) {
  // Both ranks believe they are the root: both only send, so the broadcast itself cannot notice; the next
  // call reads the other rank's stale broadcast message and names its root.
  auto st = RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<int32_t> buf(16);
    absl::Status s = comm.Broadcast(buf.data(), buf.data(), 16, DataType::kInt32, rank, {"binomial_tree"});
    if (!s.ok()) return s;
    return comm.Barrier();
  });
  bool named = false;
  for (const auto& s : st) named = named || Contains(s, "(broadcast, root ");
  EXPECT_TRUE(named) << st[0] << " / " << st[1];
}

TEST(CommunicatorApi, MismatchedCollectiveIsNamed) {
  auto st = RunRanks(3, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> buf(16);
    if (rank == 1) return comm.Allgather(buf.data() + 4, buf.data(), 4, DataType::kFloat32, {"ring"});
    return comm.Allreduce(buf.data(), buf.data(), 16, DataType::kFloat32, ReduceOp::kSum, {"ring"});
  });
  bool named = false;
  for (const auto& s : st) named = named || (Contains(s, "called allgather") && Contains(s, "called allreduce"));
  EXPECT_TRUE(named) << st[0] << " / " << st[1] << " / " << st[2];
}

TEST(CommunicatorApi, PeerThatNeverCallsTimesOutNamingIt) {
  auto env_for = [](int) {
    Environment e = TestEnv();
    e.exec_timeout_s = 1;
    return e;
  };
  absl::Notification done;
  auto st = RunRanks(
      3,
      [&](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> buf(64);
        if (rank == 2) {
          done.WaitForNotificationWithTimeout(absl::Seconds(30));
          return absl::OkStatus();
        }
        const absl::Time t0 = absl::Now();
        absl::Status s = comm.Allreduce(buf.data(), buf.data(), 64, DataType::kFloat32, ReduceOp::kSum, {"ring"});
        if (rank == 0) done.Notify();
        EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
        return s;
      },
      env_for);
  for (int r : {0, 1}) {
    ASSERT_FALSE(st[static_cast<size_t>(r)].ok());
    EXPECT_TRUE(Contains(st[static_cast<size_t>(r)], "HCCL_EXEC_TIMEOUT")) << st[static_cast<size_t>(r)];
    EXPECT_TRUE(Contains(st[static_cast<size_t>(r)], "rank ")) << st[static_cast<size_t>(r)];
  }
}

TEST(CommunicatorApi, RankThatNeverJoinsIsNamed) {
  auto store = NewMemoryStore();
  Environment e = TestEnv();
  e.connect_timeout_s = 1;
  std::vector<absl::Status> st(2);
  std::thread t0([&] { st[0] = Communicator::Create(0, 3, store, e).status(); });
  std::thread t1([&] { st[1] = Communicator::Create(1, 3, store, e).status(); });
  t0.join();
  t1.join();
  for (const auto& s : st) {
    ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_TRUE(Contains(s, "ranks 2 never joined")) << s;
    EXPECT_TRUE(Contains(s, "HCCL_CONNECT_TIMEOUT")) << s;
  }
}

// After refused calls: a 2-rank allreduce still runs and sums.
absl::Status StillUsable(Communicator& comm) {
  std::vector<int32_t> buf(8, 1);
  if (absl::Status ok = comm.Allreduce(buf.data(), buf.data(), 8, DataType::kInt32, ReduceOp::kSum); !ok.ok()) {
    return ok;
  }
  EXPECT_EQ(buf[7], 2);
  return absl::OkStatus();
}

TEST(CommunicatorApi, BadArgumentsAreClearAndLeaveTheCommunicatorUsable) {
  auto st = RunRanks(2, [](int, Communicator& comm) -> absl::Status {
    std::vector<int32_t> buf(8);
    absl::Status s = comm.Allreduce(nullptr, buf.data(), 8, DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(Contains(s, "null send buffer")) << s;
    s = comm.Allreduce(buf.data(), buf.data(), 8, DataType::kInt32, ReduceOp::kAvg);
    EXPECT_TRUE(Contains(s, "avg needs a floating-point dtype")) << s;
    s = comm.Allreduce(buf.data(), buf.data(), 8, DataType::kFloat32, ReduceOp::kBxor);
    EXPECT_TRUE(Contains(s, "bxor needs an integer dtype")) << s;
    s = comm.Broadcast(buf.data(), buf.data(), 8, DataType::kInt32, 5);
    EXPECT_TRUE(Contains(s, "root 5 is not a rank")) << s;
    s = comm.Allreduce(buf.data(), buf.data(), SIZE_MAX / 2, DataType::kInt32, ReduceOp::kSum);
    EXPECT_TRUE(Contains(s, "overflows")) << s;
    s = comm.Allreduce(buf.data(), buf.data(), 8, DataType::kInt32, ReduceOp::kSum, {"rnig"});
    EXPECT_TRUE(Contains(s, "unknown algorithm 'rnig'")) << s;
    std::vector<int32_t> gathered(2);
    s = comm.Allgather(buf.data(), gathered.data(), 1, DataType::kInt32, {"halving_doubling"});
    EXPECT_TRUE(Contains(s, "allgather has no algorithm 'halving_doubling'")) << s;
    // Still usable.
    return StillUsable(comm);
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// A documentation network (RFC 5737) that no interface of this machine is in (sandboxes do use them).
std::string UnusedNetwork() {
  for (const char* net : {"198.51.100.0/24", "203.0.113.0/24", "192.0.2.0/24"}) {
    bool used = false;
    for (const auto& i : ListInterfaces()) used = used || InSubnet(i.address, net);
    if (!used) return net;
  }
  return "0.0.0.0/32";
}

TEST(CommunicatorApi, OverlappingBuffersGiveTheResultOfTheInputBeforeTheCall) {
  // send and recv overlapping other than in place (MPI calls it erroneous): the input is copied first, so the
  // result is what the input was, whatever the algorithm (the ring read partial sums it had already written).
  // send == recv for allgather is in place on rank 0 and aliased on rank 1: both ranks still run the call.
  for (const char* config : {"ring", "auto"}) {
    auto st = RunRanks(2, [config](int rank, Communicator& comm) -> absl::Status {
      std::vector<int32_t> buf(16);
      const auto reset = [&] {
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = 100 * rank + static_cast<int32_t>(i);
      };
      reset();
      absl::Status s = comm.Allreduce(buf.data(), buf.data() + 1, 8, DataType::kInt32, ReduceOp::kSum, {config});
      if (!s.ok()) return s;
      for (int j = 0; j < 8; ++j) EXPECT_EQ(buf[static_cast<size_t>(1 + j)], 100 + 2 * j) << config << " " << j;
      reset();
      if (s = comm.Allgather(buf.data(), buf.data(), 4, DataType::kInt32, {config}); !s.ok()) return s;
      for (int j = 0; j < 8; ++j) EXPECT_EQ(buf[static_cast<size_t>(j)], 100 * (j / 4) + j % 4) << config << " " << j;
      reset();
      if (s = comm.Reducescatter(buf.data(), buf.data() + 1, 4, DataType::kInt32, ReduceOp::kSum, {config}); !s.ok()) {
        return s;
      }
      for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(buf[static_cast<size_t>(1 + j)], 100 + 2 * (4 * rank + j)) << config << " " << j;
      }
      return absl::OkStatus();
    });
    for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
  }
}

TEST(CommunicatorApi, UnreachableLinksAndBadVCountsAreRefusedBeforeAnyTraffic) {
  // Each of these is refused on every rank alike, before the call starts: the communicator stays usable.
  auto st = RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<int32_t> buf(64, 1);
    absl::Status s;
    // alltoallv: a rank that sends nothing but receives needs a receive buffer; self counts must agree.
    const std::vector<size_t> none = {0, 0},
                              one_from_peer = rank == 0 ? std::vector<size_t>{0, 1} : std::vector<size_t>{1, 0},
                              displs = {0, 0};
    s = comm.Alltoallv(buf.data(), none, displs, nullptr, one_from_peer, displs, DataType::kInt32);
    EXPECT_TRUE(Contains(s, "null receive buffer")) << s;
    const std::vector<size_t> self_one = rank == 0 ? std::vector<size_t>{1, 0} : std::vector<size_t>{0, 1},
                              self_two = rank == 0 ? std::vector<size_t>{2, 0} : std::vector<size_t>{0, 2};
    s = comm.Alltoallv(buf.data(), self_one, displs, buf.data() + 8, self_two, displs, DataType::kInt32);
    EXPECT_TRUE(Contains(s, "sends 1 elements to itself but expects 2")) << s;
    // Links that cannot reach the ranks: a documentation network no interface here is in.
    s = comm.Allreduce(buf.data(), buf.data(), 8, DataType::kInt32, ReduceOp::kSum,
                       {"ring(link=tcp@" + UnusedNetwork() + ")"});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(Contains(s, "has no interface in that network")) << s;
    s = comm.Allreduce(buf.data(), buf.data(), 8, DataType::kInt32, ReduceOp::kSum, {"ring(link=roce)"});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(Contains(s, "link=roce")) << s;
    // The documented in-place layouts still run, and the communicator is usable.
    std::vector<int32_t> all = {0, 0, 0, 0};
    all[static_cast<size_t>(2 * rank)] = rank + 10;
    all[static_cast<size_t>(2 * rank + 1)] = rank + 20;
    if (absl::Status ok = comm.Allgather(all.data() + 2 * rank, all.data(), 2, DataType::kInt32); !ok.ok()) return ok;
    EXPECT_EQ(all, (std::vector<int32_t>{10, 20, 11, 21}));
    std::vector<int32_t> rs = {1, 2, 3, 4};
    if (absl::Status ok = comm.Reducescatter(rs.data(), rs.data() + 2 * rank, 2, DataType::kInt32, ReduceOp::kSum);
        !ok.ok()) {
      return ok;
    }
    EXPECT_EQ(rs[static_cast<size_t>(2 * rank)], 2 * (2 * rank + 1));
    EXPECT_EQ(rs[static_cast<size_t>(2 * rank + 1)], 2 * (2 * rank + 2));
    return StillUsable(comm);
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, ANetworkCheckAgreesWhenOnlySomeRanksSetTheInterface) {
  // Rank 0 has HCCL_SOCKET_IFNAME=lo, which decides its addresses whatever link=tcp@network says; rank 1 has
  // none. Both must reach the same verdict on link=tcp@<a network no interface is in> (run it, over lo): a
  // verdict taken from this rank's own setting alone refused it on rank 1 and left rank 0 waiting.
  auto st = RunRanks(
      2,
      [](int rank, Communicator& comm) -> absl::Status {
        std::vector<int32_t> buf(8, rank + 1);
        absl::Status s = comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum,
                                        {"ring(link=tcp@" + UnusedNetwork() + ")"});
        if (s.ok()) {
          EXPECT_EQ(buf[7], 3);
        }
        return s;
      },
      [](int rank) {
        Environment e = TestEnv();
        if (rank == 0) e.socket_ifname = "lo";
        e.exec_timeout_s = 10;
        return e;
      });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, SplitEvenOdd) {
  auto st = RunRanks(5, [](int rank, Communicator& comm) -> absl::Status {
    auto sub = comm.Split(rank % 2, -rank);  // key reverses the order
    if (!sub.ok()) return sub.status();
    const int expect_size = rank % 2 == 0 ? 3 : 2;
    EXPECT_EQ((*sub)->size(), expect_size);
    int64_t v = rank, sum = 0;
    if (absl::Status s = (*sub)->Allreduce(&v, &sum, 1, DataType::kInt64, ReduceOp::kSum); !s.ok()) return s;
    EXPECT_EQ(sum, rank % 2 == 0 ? 0 + 2 + 4 : 1 + 3);
    // Highest old rank gets new rank 0 (key = -rank).
    if (rank == 4 || rank == 3) {
      EXPECT_EQ((*sub)->rank(), 0);
    }
    auto none = comm.Split(-1, 0);
    if (!none.ok()) return none.status();
    EXPECT_EQ(none->get(), nullptr);
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, NonBlockingRunsInIssueOrder) {
  auto st = RunRanks(3, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<std::vector<int32_t>> bufs(6, std::vector<int32_t>(1000));
    std::vector<std::shared_ptr<Work>> works;
    for (size_t i = 0; i < bufs.size(); ++i) {
      std::fill(bufs[i].begin(), bufs[i].end(), static_cast<int32_t>(rank + i));
      works.push_back(comm.Iallreduce(bufs[i].data(), bufs[i].data(), 1000, DataType::kInt32, ReduceOp::kSum));
    }
    // A blocking call issued now runs after the queued ones.
    int32_t x = 1, y = 0;
    if (absl::Status s = comm.Allreduce(&x, &y, 1, DataType::kInt32, ReduceOp::kSum); !s.ok()) return s;
    EXPECT_EQ(y, 3);
    for (size_t i = 0; i < works.size(); ++i) {
      EXPECT_TRUE(works[i]->Test());
      if (absl::Status s = works[i]->Wait(); !s.ok()) return s;
      EXPECT_EQ(bufs[i][999], static_cast<int32_t>(3 * i + 3));
    }
    // The variants built on Enqueue, in issue order with the others.
    std::vector<int32_t> mine(2, rank), all(6), block(2);
    std::vector<size_t> counts(3, 2), displs = {0, 2, 4};
    auto g = comm.Iallgatherv(mine.data(), all.data(), counts, displs, DataType::kInt32);
    auto ga = comm.Igather(mine.data(), all.data(), 2, DataType::kInt32, 1);
    auto sc = comm.Iscatter(all.data(), block.data(), 2, DataType::kInt32, 1);
    int32_t token = rank;
    auto s1 = rank == 0 ? comm.Isend(&token, 1, DataType::kInt32, 2) : nullptr;
    auto r1 = rank == 2 ? comm.Irecv(&token, 1, DataType::kInt32, 0) : nullptr;
    for (auto* w : {&g, &ga, &sc, &s1, &r1}) {
      if (*w) {
        if (absl::Status s = (*w)->Wait(); !s.ok()) return s;
      }
    }
    EXPECT_EQ(block[0], rank);  // the root scattered the gathered blocks back
    if (rank == 2) {
      EXPECT_EQ(token, 0);
    }
    auto b = comm.Ibarrier();
    return b->Wait();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, BlockingSendWaitsBehindQueuedWork) {
  // A Send issued right after an Iallreduce must not overtake it: the peer's allreduce would read the send's
  // message as a mismatched call (Send took the execution lock before the progress thread did).
  auto st = RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<int32_t> buf(1 << 16);
    for (int round = 0; round < 20; ++round) {
      std::fill(buf.begin(), buf.end(), rank + round);
      int32_t token = rank == 0 ? round : -1;
      if (rank == 0) {
        auto w = comm.Iallreduce(buf.data(), buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum);
        if (absl::Status s = comm.Send(&token, 1, DataType::kInt32, 1); !s.ok()) return s;
        if (absl::Status s = w->Wait(); !s.ok()) return s;
      } else {
        auto w = comm.Iallreduce(buf.data(), buf.data(), buf.size(), DataType::kInt32, ReduceOp::kSum);
        if (absl::Status s = w->Wait(); !s.ok()) return s;
        if (absl::Status s = comm.Recv(&token, 1, DataType::kInt32, 0); !s.ok()) return s;
        EXPECT_EQ(token, round);
      }
      EXPECT_EQ(buf.back(), 2 * round + 1) << "rank " << rank << " round " << round;
    }
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, AlltoallvAutoDoesNotPickBySize) {
  // Each rank knows only its own counts: a per-size override must not send the two ranks different ways
  // (rank 0 sends 8 bytes, rank 1 400; before, rank 0 took shm and rank 1 tcp and both waited for the other).
  auto env = [](int) {
    Environment e = TestEnv();
    e.tune_algo = "alltoallv:0-64=pairwise(link=shm),64-=pairwise(link=tcp)";
    return e;
  };
  auto st = RunRanks(
      2,
      [](int rank, Communicator& comm) -> absl::Status {
        const std::vector<size_t> send_counts = rank == 0 ? std::vector<size_t>{1, 1} : std::vector<size_t>{50, 50};
        const std::vector<size_t> recv_counts = {1, 50};  // one element from rank 0, fifty from rank 1
        const std::vector<size_t> send_displs = {0, send_counts[0]}, recv_displs = {0, recv_counts[0]};
        std::vector<int32_t> send(send_counts[0] + send_counts[1]), recv(51, -1);
        for (size_t i = 0; i < send.size(); ++i) send[i] = static_cast<int32_t>(1000 * rank + i);
        if (absl::Status s = comm.Alltoallv(send.data(), send_counts, send_displs, recv.data(), recv_counts,
                                            recv_displs, DataType::kInt32);
            !s.ok()) {
          return s;
        }
        // From rank 0: its block for us; from rank 1: its block for us (rank 1's second block starts at 50).
        const size_t from0 = rank == 0 ? 0 : 1;
        EXPECT_EQ(recv[0], static_cast<int32_t>(from0)) << "rank " << rank;
        for (size_t i = 0; i < 50; ++i) {
          EXPECT_EQ(recv[1 + i], static_cast<int32_t>(1000 + (rank == 0 ? 0 : 50) + i)) << "rank " << rank;
        }
        return absl::OkStatus();
      },
      env);
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, SendRecvInOrder) {
  auto st = RunRanks(3, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<double> a(100), b(100);
    if (rank == 0) {
      std::iota(a.begin(), a.end(), 0.0);
      if (absl::Status s = comm.Send(a.data(), 100, DataType::kFloat64, 2); !s.ok()) return s;
      std::iota(a.begin(), a.end(), 100.0);
      if (absl::Status s = comm.Send(a.data(), 100, DataType::kFloat64, 2); !s.ok()) return s;
    }
    if (rank == 2) {
      if (absl::Status s = comm.Recv(b.data(), 100, DataType::kFloat64, 0); !s.ok()) return s;
      EXPECT_EQ(b[99], 99.0);
      if (absl::Status s = comm.Recv(b.data(), 100, DataType::kFloat64, 0); !s.ok()) return s;
      EXPECT_EQ(b[0], 100.0);
    }
    EXPECT_FALSE(comm.Send(a.data(), 1, DataType::kFloat64, rank).ok());  // to self
    // A collective after point-to-point still agrees on the sequence.
    return comm.Barrier();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, SameDeviceOnOneNodeIsRefusedNamingBothRanks) {
  auto st = RunRanks(
      3, [](int, Communicator&) { return absl::OkStatus(); },
      [](int rank) {
        Environment e = TestEnv();
        e.device = rank == 2 ? 0 : rank;
        return e;
      });
  for (const auto& s : st) {
    ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(Contains(s, "ranks 0 and 2 both claim device 0")) << s;
  }
}

TEST(CommunicatorApi, DecisiveSettingsMustMatch) {
  auto st = RunRanks(
      2, [](int, Communicator&) { return absl::OkStatus(); },
      [](int rank) {
        Environment e = TestEnv();
        if (rank == 1) e.buffsize_bytes = 4u << 20;
        return e;
      });
  for (const auto& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s, "HCCL_BUFFSIZE=2' vs 'HCCL_BUFFSIZE=4' on rank 1")) << s;
  }
}

class CountingSink : public TimingSink {
 public:
  void Record(const TimingSample& s) override {
    absl::MutexLock l(&mu);
    samples.push_back(s);
  }
  absl::Mutex mu;
  std::vector<TimingSample> samples;
};

TEST(CommunicatorApi, TimingSinkSeesEveryCall) {
  auto st = RunRanks(2, [](int, Communicator& comm) -> absl::Status {
    auto sink = std::make_shared<CountingSink>();
    comm.SetTimingSink(sink);
    std::vector<float> v(256);
    for (int i = 0; i < 3; ++i) {
      if (absl::Status s = comm.Allreduce(v.data(), v.data(), 256, DataType::kFloat32, ReduceOp::kSum, {"ring"});
          !s.ok()) {
        return s;
      }
    }
    absl::MutexLock l(&sink->mu);
    EXPECT_EQ(sink->samples.size(), 3u);
    EXPECT_EQ(sink->samples.back().bytes, 1024u);
    EXPECT_EQ(sink->samples.back().configuration, "ring(chunk=512K,channels=1,link=auto)");
    EXPECT_GT(sink->samples.back().sequence, sink->samples.front().sequence);
    EXPECT_EQ(comm.last_config(), "ring(chunk=512K,channels=1,link=auto)");
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// After refused calls: an allreduce of `buf` (all ones) runs and every element is the number of ranks.
absl::Status SumsOnEveryRank(Communicator& comm, std::vector<float>& buf) {
  std::fill(buf.begin(), buf.end(), 1.0f);
  if (absl::Status s = comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
      !s.ok()) {
    return s;
  }
  for (float v : buf) EXPECT_EQ(v, static_cast<float>(comm.size()));
  return absl::OkStatus();
}

// An execution timeout the refusal tests' waits must end well before (they assert seconds, not a minute).
Environment MinuteExecTimeout(int) {
  Environment e = TestEnv();
  e.exec_timeout_s = 60;
  return e;
}

// A call refused on one rank only (its own arguments) while the others are in it: they stop waiting after one
// blocked slice, naming that rank and its reason, instead of waiting out HCCL_EXEC_TIMEOUT (60 s here); their
// failure breaks the communicator, and the refusing rank's next call learns it the same way. Through the mailbox
// (auto, small) and through messages (ring); the refusing rank going on to its next call at once (the others
// then see a mismatch, explained by the refusal) or 3 s later (they find the refusal while they wait).
TEST(CommunicatorApi, ArgumentsRefusedOnOneRankEndTheOthersWaitNamingIt) {
  for (const auto& [config, pause] : {std::pair<std::string, absl::Duration>{"auto", absl::ZeroDuration()},
                                      {"ring", absl::ZeroDuration()},
                                      {"auto", absl::Seconds(3)},
                                      {"ring", absl::Seconds(3)}}) {
    auto st = RunRanks(
        3,
        [&](int rank, Communicator& comm) -> absl::Status {
          std::vector<float> buf(16, 1.0f);
          const absl::Time t0 = absl::Now();
          absl::Status s = comm.Allreduce(rank == 1 ? nullptr : buf.data(), buf.data(), buf.size(), DataType::kFloat32,
                                          ReduceOp::kSum, {config});
          // Waiting for the refusing rank's next call would take `pause`; the probe finds the refusal sooner.
          EXPECT_LT(absl::Now() - t0, pause > absl::ZeroDuration() ? absl::Milliseconds(2500) : absl::Seconds(20))
              << config << " rank " << rank;
          if (rank == 1) {
            EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
            EXPECT_TRUE(Contains(s, "null send buffer")) << s;
            absl::SleepFor(pause);
          } else {
            EXPECT_FALSE(s.ok());
            EXPECT_TRUE(Contains(s, "rank 1 refused its allreduce") && Contains(s, "null send buffer"))
                << config << " rank " << rank << ": " << s;
          }
          // The others' communicators are broken now, and rank 1 finds out at its next call.
          const absl::Time t1 = absl::Now();
          s = comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum, {config});
          EXPECT_FALSE(s.ok()) << config << " rank " << rank;
          EXPECT_LT(absl::Now() - t1, absl::Seconds(20)) << config << " rank " << rank << ": " << s;
          EXPECT_TRUE(Contains(s, "refused")) << config << " rank " << rank << ": " << s;
          return absl::OkStatus();
        },
        MinuteExecTimeout);
    for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
  }
}

// Every rank refusing the same call leaves nothing behind: a later call that waits (a peer arrives 300 ms late,
// several blocked slices, each probing for refusals) runs normally, and so does a receive whose sender is late.
// A layer above the communicator refusing a call (RefuseCall: the PyTorch backend's tensor checks) is announced
// like the communicator's own refusals: the others fail naming the rank and its reason instead of waiting out
// HCCL_EXEC_TIMEOUT; refused on every rank alike, nothing waits and the communicator stays usable.
TEST(CommunicatorApi, CallsRefusedAboveTheCommunicatorEndTheOthersWait) {
  auto alike = RunRanks(
      2,
      [](int, Communicator& comm) -> absl::Status {
        absl::Status s = comm.RefuseCall(Collective::kAllgather, "the output list has 3 tensors");
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        EXPECT_TRUE(Contains(s, "the output list has 3 tensors")) << s;
        s = comm.RefuseCall(Collective::kSendRecv, "a send check");
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
        EXPECT_TRUE(Contains(s, "point-to-point")) << s;
        std::vector<float> buf(16, 1.0f);
        return SumsOnEveryRank(comm, buf);
      },
      MinuteExecTimeout);
  for (const auto& s : alike) EXPECT_TRUE(s.ok()) << s;
  auto one = RunRanks(
      3,
      [](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> buf(16, 1.0f);
        const absl::Time t0 = absl::Now();
        absl::Status s = rank == 1
                             ? comm.RefuseCall(Collective::kAllreduce, "tensors differ in dtype")
                             : comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
        EXPECT_FALSE(s.ok()) << "rank " << rank;
        EXPECT_LT(absl::Now() - t0, absl::Seconds(20)) << "rank " << rank << ": " << s;
        if (rank != 1) {
          EXPECT_TRUE(Contains(s, "rank 1 refused its allreduce") && Contains(s, "tensors differ in dtype"))
              << "rank " << rank << ": " << s;
        }
        return absl::OkStatus();
      },
      MinuteExecTimeout);
  for (const auto& s : one) EXPECT_TRUE(s.ok()) << s;
}

TEST(CommunicatorApi, CallsRefusedEverywhereLeaveLaterWaitsAlone) {
  auto st = RunRanks(2, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> buf(16, 1.0f);
    for (int i = 0; i < 3; ++i) {
      absl::Status s = comm.Allreduce(nullptr, buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    }
    // Point-to-point right after them carries the refused call's number (it takes none of its own): a late
    // sender is no refusal.
    if (rank == 1) {
      absl::SleepFor(absl::Milliseconds(300));
      if (absl::Status s = comm.Send(buf.data(), buf.size(), DataType::kFloat32, 0); !s.ok()) return s;
    } else {
      std::vector<float> got(16, 0.0f);
      if (absl::Status s = comm.Recv(got.data(), got.size(), DataType::kFloat32, 1); !s.ok()) return s;
      EXPECT_EQ(got[15], 1.0f);
    }
    if (rank == 1) absl::SleepFor(absl::Milliseconds(300));
    return SumsOnEveryRank(comm, buf);
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// A failed receive breaks the communicator like a failed collective and says so: rank 0 receives while rank 1
// runs an allreduce (a mismatch rank 0 reports at once, or its 1 s timeout); rank 1's allreduce then ends naming
// rank 0's failure, not after its own HCCL_EXEC_TIMEOUT (60 s here, which it took before the announcement).
TEST(CommunicatorApi, FailedPointToPointIsAnnounced) {
  auto env_for = [](int rank) {
    Environment e = TestEnv();
    e.exec_timeout_s = rank == 0 ? 1 : 60;
    return e;
  };
  auto st = RunRanks(
      2,
      [](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> buf(16, 1.0f);
        const absl::Time t0 = absl::Now();
        absl::Status s = rank == 0
                             ? comm.Recv(buf.data(), buf.size(), DataType::kFloat32, 1)
                             : comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum);
        EXPECT_FALSE(s.ok()) << "rank " << rank;
        EXPECT_LT(absl::Now() - t0, absl::Seconds(20)) << "rank " << rank << ": " << s;
        if (rank == 1) {
          EXPECT_TRUE(Contains(s, "rank 0 aborted a receive from rank 1")) << s;
        }
        return absl::OkStatus();
      },
      env_for);
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// A verdict the ranks reach together is no refusal: `symmetric` forced on heap buffers is refused by every rank
// after the algorithm's header round. With one rank 300 ms late (the others blocked in that round for several
// slices, probing), every rank gets the verdict and the communicator stays usable on all of them.
TEST(CommunicatorApi, AgreedVerdictsAreNotRefusals) {
  auto st = RunRanks(3, [](int rank, Communicator& comm) -> absl::Status {
    std::vector<float> buf(1024, 1.0f);
    for (int i = 0; i < 3; ++i) {
      if (rank == i % 3) absl::SleepFor(absl::Milliseconds(300));
      absl::Status s =
          comm.Allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum, {"symmetric"});
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "rank " << rank << ": " << s;
      EXPECT_TRUE(Contains(s, "symmetric")) << s;
    }
    return SumsOnEveryRank(comm, buf);
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// last_config() names the configuration of the last call, also when that call repeated a remembered one (whose
// configuration is kept in the call memo, not copied per call) and after a symmetric allocation forgot the memo.
TEST(CommunicatorApi, LastConfigFollowsRepeatedCallsOfEachCollective) {
  auto st = RunRanks(2, [](int, Communicator& comm) -> absl::Status {
    absl::Status s;
    std::vector<float> v(16 * 1024, 1.0f);  // 64 KiB
    auto sum = [&](const std::string& config) {
      return comm.Allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum, {config});
    };
    auto barrier = comm.ResolveConfig(Collective::kBarrier, DataType::kUint8, 0, "auto");
    auto allreduce = comm.ResolveConfig(Collective::kAllreduce, DataType::kFloat32, v.size() * 4, "auto");
    if (!barrier.ok()) return barrier.status();
    if (!allreduce.ok()) return allreduce.status();
    EXPECT_NE(*barrier, *allreduce) << "the test needs two different configurations";
    for (int i = 0; i < 4; ++i) {  // from the second round on, both calls repeat remembered ones
      if (s = comm.Barrier(); !s.ok()) return s;
      EXPECT_EQ(comm.last_config(), *barrier) << "round " << i;
      if (s = sum("auto"); !s.ok()) return s;
      EXPECT_EQ(comm.last_config(), *allreduce) << "round " << i;
    }
    if (s = sum("ring"); !s.ok()) return s;
    EXPECT_EQ(comm.last_config(), "ring(chunk=512K,channels=1,link=auto)");
    if (s = comm.Barrier(); !s.ok()) return s;
    EXPECT_EQ(comm.last_config(), *barrier);
    auto sym = comm.AllocSymmetric(4096);  // forgets every remembered call
    if (sym.ok()) {
      EXPECT_EQ(comm.last_config(), *barrier);
      if (s = comm.FreeSymmetric(*sym); !s.ok()) return s;
    }
    if (s = sum("auto"); !s.ok()) return s;
    EXPECT_EQ(comm.last_config(), *allreduce);
    EXPECT_EQ(v[0], 64.0f);  // 1, doubled by each of the 6 sums over 2 ranks
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// HCCL_TUNE_ALGO choosing, for every size, the algorithms whose small calls are one mailbox exchange.
Environment MailboxAlgorithms(int) {
  Environment e = TestEnv();
  e.tune_algo =
      "allreduce:0-=one_shot/allgather:0-=direct/reducescatter:0-=direct/barrier:0-=one_shot/alltoall:0-=direct";
  return e;
}

// A remembered small call whose first run was one mailbox exchange repeats through the algorithm's mailbox form
// (CallMemo::exchange, no call context): new contents in the same buffers every round, every collective that has
// such a form interleaved with the others (each remembers its own last call), the allreduce and the alltoall
// out of place for a dozen rounds and then in place, every rank's output checked every round.
TEST(CommunicatorApi, RepeatedMailboxCallsStayCorrectOnEveryRank) {
  for (int n : {2, 3, 4}) {
    auto st = RunRanks(
        n,
        [n](int rank, Communicator& comm) -> absl::Status {
          constexpr size_t kCount = 6;
          const size_t all = kCount * static_cast<size_t>(n);
          std::vector<float> in(all), out(all), inplace(kCount);
          absl::Status s;
          for (int round = 0; round < 24; ++round) {
            const bool in_place = round >= 12;
            const auto value = [round](int r, size_t i) { return static_cast<float>(round * 1000 + r * 100 + i); };
            const auto sum = [&](size_t i) {
              float t = 0;
              for (int r = 0; r < n; ++r) t += value(r, i);
              return t;
            };
            for (size_t i = 0; i < all; ++i) in[i] = value(rank, i);
            for (size_t i = 0; i < kCount; ++i) inplace[i] = value(rank, i);
            float* result = in_place ? inplace.data() : out.data();
            if (s = comm.Allreduce(in_place ? inplace.data() : in.data(), result, kCount, DataType::kFloat32,
                                   ReduceOp::kSum, {});
                !s.ok()) {
              return s;
            }
            for (size_t i = 0; i < kCount; ++i) {
              EXPECT_EQ(result[i], sum(i)) << "allreduce, in place " << in_place << ", round " << round << ", " << i;
            }
            if (s = comm.Barrier(); !s.ok()) return s;
            if (s = comm.Allgather(in.data(), out.data(), kCount, DataType::kFloat32, {}); !s.ok()) return s;
            for (size_t i = 0; i < all; ++i) {
              EXPECT_EQ(out[i], value(static_cast<int>(i / kCount), i % kCount)) << "allgather, round " << round;
            }
            // alltoall: block q of rank r's input is value(r, q * kCount + i); rank r receives block r of each.
            float* a2a = in_place ? in.data() : out.data();
            if (s = comm.Alltoall(in.data(), a2a, kCount, DataType::kFloat32, {}); !s.ok()) return s;
            for (size_t i = 0; i < all; ++i) {
              EXPECT_EQ(a2a[i], value(static_cast<int>(i / kCount), static_cast<size_t>(rank) * kCount + i % kCount))
                  << "alltoall, in place " << in_place << ", round " << round << ", " << i;
            }
            for (size_t i = 0; i < all; ++i) in[i] = value(rank, i);
            if (s = comm.Reducescatter(in.data(), out.data(), kCount, DataType::kFloat32, ReduceOp::kSum, {});
                !s.ok()) {
              return s;
            }
            for (size_t i = 0; i < kCount; ++i) {
              EXPECT_EQ(out[i], sum(static_cast<size_t>(rank) * kCount + i)) << "reducescatter, round " << round;
            }
          }
          EXPECT_EQ(comm.last_config(), "direct(channels=1,link=auto)");
          return absl::OkStatus();
        },
        MailboxAlgorithms);
    for (const auto& s : st) EXPECT_TRUE(s.ok()) << n << " ranks: " << s;
  }
}

// HCCL_TUNE_TEST_DELAY (read once at init into the communicator's run function): every call of the slowed
// configuration takes at least the delay — the first, and the repeats that would otherwise go straight to the
// algorithm's mailbox form — with every rank's result still right; another configuration's calls are not slowed
// (their results checked; no upper bound on a loaded machine's time).
TEST(CommunicatorApi, TestDelaySlowsEveryCallOfItsConfiguration) {
  constexpr auto kDelay = std::chrono::milliseconds(20);
  auto env = [](int) {
    Environment e = TestEnv();
    e.tune_algo = "allreduce:0-=one_shot";
    auto delays = ParseTestDelay("allreduce:one_shot=20ms");
    EXPECT_TRUE(delays.ok()) << delays.status();
    if (delays.ok()) e.test_delays = *delays;
    return e;
  };
  auto st = RunRanks(
      2,
      [&](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> in(8), out(8);
        for (int round = 0; round < 4; ++round) {
          std::fill(in.begin(), in.end(), static_cast<float>(rank + round));
          const auto t0 = std::chrono::steady_clock::now();
          absl::Status s = comm.Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum, {});
          if (!s.ok()) return s;
          EXPECT_GE(std::chrono::steady_clock::now() - t0, kDelay) << "rank " << rank << ", round " << round;
          EXPECT_EQ(comm.last_config(), "one_shot(channels=1,link=auto)");
          for (float v : out) EXPECT_EQ(v, static_cast<float>(1 + 2 * round)) << "rank " << rank;
        }
        absl::Status s = comm.Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum,
                                        {"recursive_doubling"});
        if (!s.ok()) return s;
        for (float v : out) EXPECT_EQ(v, 7.0f) << "rank " << rank;
        return absl::OkStatus();
      },
      env);
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// A rank that departs from a call the others repeat through its mailbox form is named by count, as on a first call.
TEST(CommunicatorApi, MismatchAfterRepeatedMailboxCallsIsNamed) {
  auto st = RunRanks(
      3,
      [](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> buf(8, 1.0f);
        for (int round = 0; round < 6; ++round) {
          const size_t count = rank == 1 && round == 5 ? 6 : 8;
          absl::Status s = comm.Allreduce(buf.data(), buf.data(), count, DataType::kFloat32, ReduceOp::kSum, {});
          if (!s.ok()) return s;
          EXPECT_EQ(buf[0], std::pow(3.0f, static_cast<float>(round + 1))) << "round " << round;
        }
        return absl::OkStatus();
      },
      MailboxAlgorithms);
  bool named = false;
  for (const auto& s : st) {
    ASSERT_FALSE(s.ok());
    EXPECT_TRUE(Contains(s, "called allreduce with")) << s;
    named = named || Contains(s, "rank 1 called allreduce with 6 elements");
  }
  EXPECT_TRUE(named) << st[0] << " / " << st[1] << " / " << st[2];
}

}  // namespace
}  // namespace hccltune

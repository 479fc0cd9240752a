// StreamEndpoint over the real shm and TCP transports, ranks as threads; and the rendezvous stores.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/bootstrap/store.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/transport/shm/cma_cost.h"
#include "runtime/transport/shm/shm_transport.h"
#include "runtime/transport/stream_endpoint.h"
#include "runtime/transport/tcp/tcp_transport.h"
#include "tests/unit/shm_fixture.h"

namespace hccltune {
namespace {

using namespace shmtest;  // NOLINT(build/namespaces): the shm fixture helpers

// Ring exchange where every rank posts its send before its receive, with messages larger than the ring.
void RingExchange(std::vector<std::unique_ptr<StreamEndpoint>>& eps, size_t bytes) {
  const int n = static_cast<int>(eps.size());
  std::vector<std::thread> threads;
  std::vector<absl::Status> st(static_cast<size_t>(n));
  std::vector<std::vector<uint8_t>> got(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<uint8_t> out(bytes);
      for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(r * 31 + i * 7);
      got[static_cast<size_t>(r)].resize(bytes);
      StreamEndpoint& ep = *eps[static_cast<size_t>(r)];
      const OpHandle s = ep.Isend((r + 1) % n, out.data(), bytes);
      const OpHandle v = ep.Irecv((r + n - 1) % n, got[static_cast<size_t>(r)].data(), bytes);
      absl::Status a = ep.Wait(s), b = ep.Wait(v);
      st[static_cast<size_t>(r)] = a.ok() ? b : a;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)];
    const int from = (r + n - 1) % n;
    for (size_t i = 0; i < bytes; ++i) {
      ASSERT_EQ(got[static_cast<size_t>(r)][i], static_cast<uint8_t>(from * 31 + i * 7))
          << "rank " << r << " byte " << i;
    }
  }
}

TEST(ShmSegments, OrphansOfDeadProcessesAreRemovedWhenOldEnough) {
  // A directory standing in for /dev/shm: segments of a process that is gone (a child that exited), of this
  // live process, and other names; only the dead process's old segment goes.
  char tmpl[] = "/tmp/hccltune-orphans-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const auto make = [&](const std::string& name, bool old) {
    const std::string path = dir + "/" + name;
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
    if (old) {
      const timeval two_hours_ago[2] = {{::time(nullptr) - 7200, 0}, {::time(nullptr) - 7200, 0}};
      ASSERT_EQ(::utimes(path.c_str(), two_hours_ago), 0);
    }
  };
  const std::string dead = absl::StrCat("hccltune-", child, "-abc-0"),
                    fresh = absl::StrCat("hccltune-", child, "-def-1"),
                    live = absl::StrCat("hccltune-", ::getpid(), "-abc-0");
  make(dead, true);
  make(fresh, false);
  make(live, true);
  make("hccltune-notapid-0", true);
  make("another-program", true);
  EXPECT_EQ(RemoveOrphanedSegments(absl::Hours(1), dir), 1);
  const auto exists = [&](const std::string& name) { return ::access((dir + "/" + name).c_str(), F_OK) == 0; };
  EXPECT_FALSE(exists(dead));
  EXPECT_TRUE(exists(fresh));
  EXPECT_TRUE(exists(live));
  EXPECT_TRUE(exists("hccltune-notapid-0"));
  EXPECT_TRUE(exists("another-program"));
  for (const auto& name : {fresh, live, std::string("hccltune-notapid-0"), std::string("another-program")}) {
    ::unlink((dir + "/" + name).c_str());
  }
  ::rmdir(dir.c_str());
}

TEST(ShmTransport, RingLargerThanBuffer) {
  for (int n : {2, 3, 4}) {
    auto doms = MakeShm(n, 64 * 1024);
    std::vector<std::unique_ptr<StreamEndpoint>> eps;
    for (int r = 0; r < n; ++r) {
      eps.push_back(std::make_unique<StreamEndpoint>(r, ShmPairs(*doms[static_cast<size_t>(r)], n, r),
                                                     doms[static_cast<size_t>(r)]->doorbell(), absl::Seconds(20)));
    }
    RingExchange(eps, 1 << 20);
    RingExchange(eps, 0);
    RingExchange(eps, 13);
    EXPECT_EQ(eps[0]->stats().sends, 3u);
  }
}

// A peer's segment is mapped once its owner finished it: before Create it is Unavailable (retry), after it OK (and
// again a no-op), and a segment of another layout is a FailedPrecondition naming it, never a wait.
TEST(ShmTransport, MapPeerWaitsForTheSegmentAndNamesAMismatch) {
  const std::vector<int> ranks = {0, 1};
  const std::string prefix = absl::StrCat("hccltune-test-mappeer-", ::getpid());
  auto zero = ShmDomain::Create(0, ranks, 64 * 1024, prefix, RingOnly());
  ASSERT_TRUE(zero.ok()) << zero.status();
  const std::string name1 = absl::StrCat("/", prefix, "-1");
  absl::Status early = (*zero)->MapPeer(1, name1);
  EXPECT_TRUE(absl::IsUnavailable(early)) << early;
  auto one = ShmDomain::Create(1, ranks, 64 * 1024, prefix, RingOnly());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE((*zero)->MapPeer(1, name1).ok());
  EXPECT_TRUE((*zero)->MapPeer(1, name1).ok());
  EXPECT_TRUE((*one)->MapPeer(0, (*zero)->segment_name()).ok());
  EXPECT_NE((*zero)->pair(1), nullptr);
  auto other = ShmDomain::Create(1, ranks, 128 * 1024, prefix + "-other", RingOnly());
  ASSERT_TRUE(other.ok()) << other.status();
  auto lone = ShmDomain::Create(0, ranks, 64 * 1024, prefix + "-lone", RingOnly());
  ASSERT_TRUE(lone.ok()) << lone.status();
  absl::Status mismatch = (*lone)->MapPeer(1, (*other)->segment_name());
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kFailedPrecondition) << mismatch;
  EXPECT_NE(mismatch.message().find("does not match this rank's layout"), std::string::npos) << mismatch;
  for (auto* d : {zero->get(), one->get(), other->get(), lone->get()}) d->Unlink();
}

TEST(ShmTransport, SizeMismatchIsNamedError) {
  auto doms = MakeShm(2, 64 * 1024);
  StreamEndpoint a(0, ShmPairs(*doms[0], 2, 0), doms[0]->doorbell(), absl::Seconds(5));
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Seconds(5));
  CallDescriptor ca{7, Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 1000, 0};
  CallDescriptor cb{7, Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 1024, 0};
  a.SetCall(ca);
  b.SetCall(cb);
  std::vector<float> x(1000), y(1024);
  std::thread t([&] { (void)a.Send(1, x.data(), x.size() * 4); });
  absl::Status s = b.Recv(0, y.data(), y.size() * 4);
  t.join();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 0 called allreduce with 1000 elements, rank 1 with 1024"), std::string::npos) << s;
}

TEST(ShmTransport, TimeoutNamesThePeer) {
  auto doms = MakeShm(2, 64 * 1024);
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Milliseconds(300));
  char c;
  const absl::Time t0 = absl::Now();
  absl::Status s = b.Recv(0, &c, 1);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  ASSERT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("for rank 0"), std::string::npos) << s;
  // The endpoint stays broken.
  EXPECT_FALSE(b.Recv(0, &c, 1).ok());
}

// A pair with no capabilities (no RingReads), so StreamEndpoint's receive-and-reduce takes its staged path.
class NoPeekPair final : public Pair {
 public:
  explicit NoPeekPair(Pair* p) : p_(p) {}
  int lanes() const override { return p_->lanes(); }
  absl::StatusOr<size_t> TryWrite(int lane, const void* d, size_t b) override { return p_->TryWrite(lane, d, b); }
  absl::StatusOr<size_t> TryRead(int lane, void* d, size_t b) override { return p_->TryRead(lane, d, b); }
  void Notify() override { p_->Notify(); }
  std::string Describe() const override { return "nopeek"; }

 private:
  Pair* p_;
};

// Receive-and-reduce through a ring smaller than the message, after an odd-sized message so 8-byte elements
// straddle the ring's wrap; out of place and in place; in place from the ring (Peek) and staged.
TEST(ShmTransport, RecvReduceAcrossWrap) {
  for (bool peek : {true, false}) {
    auto doms = MakeShm(2, 4096);
    NoPeekPair np0(doms[0]->pair(1)), np1(doms[1]->pair(0));
    std::vector<Pair*> p0 = ShmPairs(*doms[0], 2, 0), p1 = ShmPairs(*doms[1], 2, 1);
    if (!peek) p0[1] = &np0, p1[0] = &np1;
    StreamEndpoint a(0, p0, doms[0]->doorbell(), absl::Seconds(20));
    StreamEndpoint b(1, p1, doms[1]->doorbell(), absl::Seconds(20));
    ASSERT_NE(b.capabilities().recv_reduce, nullptr);
    const Combiner add{8, AddInt64, 0, 0};
    for (size_t count : {size_t{0}, size_t{1}, size_t{10007}}) {
      std::vector<int64_t> sent(count), local(count), out(count, -1), inplace(count);
      for (size_t i = 0; i < count; ++i) {
        sent[i] = static_cast<int64_t>(i * 1000003 + 7);
        local[i] = static_cast<int64_t>(i) - 5;
        inplace[i] = local[i];
      }
      const char odd[3] = {1, 2, 3};
      char odd_in[3] = {};
      std::thread t([&] {
        ASSERT_TRUE(a.Send(1, odd, 3).ok());
        ASSERT_TRUE(a.Send(1, sent.data(), count * 8).ok());
        ASSERT_TRUE(a.Send(1, sent.data(), count * 8).ok());
      });
      ASSERT_TRUE(b.Recv(0, odd_in, 3).ok());
      const OpHandle h1 = b.IrecvReduce(0, out.data(), local.data(), count * 8, &add);
      const OpHandle h2 = b.IrecvReduce(0, inplace.data(), inplace.data(), count * 8, &add);
      EXPECT_TRUE(b.Wait(h1).ok());
      EXPECT_TRUE(b.Wait(h2).ok());
      t.join();
      EXPECT_EQ(odd_in[2], 3);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(out[i], sent[i] + local[i]) << "peek " << peek << " element " << i;
        ASSERT_EQ(inplace[i], sent[i] + local[i]) << "peek " << peek << " element " << i;
      }
    }
    EXPECT_EQ(b.stats().recvs, 9u);
  }
}

// Messages around the one-frame limit (header + payload + padding in one ring write) through a 4 KiB ring, so
// frames start at every 16-byte offset and straddle the wrap; plain and receive-and-reduce; every byte checked.
TEST(ShmTransport, SmallFramesAcrossWrapAtEveryOffset) {
  auto doms = MakeShm(2, 4096);
  StreamEndpoint a(0, ShmPairs(*doms[0], 2, 0), doms[0]->doorbell(), absl::Seconds(20));
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Seconds(20));
  const Combiner add{8, AddInt64, 0, 0};
  const std::vector<size_t> sizes = {0, 8, 16, 24, 200, 224, 232, 504, 984, 992, 1000, 1008, 1992, 2040};
  constexpr int kRounds = 40;
  std::thread t([&] {
    for (int round = 0; round < kRounds; ++round) {
      for (size_t bytes : sizes) {
        std::vector<int64_t> v(bytes / 8);
        for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(round * 100000 + bytes * 10 + i);
        ASSERT_TRUE(a.Send(1, v.data(), bytes).ok());
        ASSERT_TRUE(a.Send(1, v.data(), bytes).ok());  // the second one is reduced on arrival
      }
      const char odd[5] = {1, 2, 3, 4, 5};  // shifts the next round's frames by 16 bytes in the stream
      ASSERT_TRUE(a.Send(1, odd, 5).ok());
    }
  });
  for (int round = 0; round < kRounds; ++round) {
    for (size_t bytes : sizes) {
      std::vector<int64_t> got(bytes / 8, -1), local(bytes / 8), reduced(bytes / 8, -1);
      for (size_t i = 0; i < local.size(); ++i) local[i] = static_cast<int64_t>(i) * 3 - 7;
      ASSERT_TRUE(b.Recv(0, got.data(), bytes).ok());
      const OpHandle h = b.IrecvReduce(0, reduced.data(), local.data(), bytes, &add);
      ASSERT_TRUE(b.Wait(h).ok());
      for (size_t i = 0; i < got.size(); ++i) {
        const int64_t want = static_cast<int64_t>(round * 100000 + bytes * 10 + i);
        ASSERT_EQ(got[i], want) << "round " << round << ", " << bytes << " bytes, element " << i;
        ASSERT_EQ(reduced[i], want + local[i]) << "round " << round << ", " << bytes << " bytes, element " << i;
      }
    }
    char odd_in[5] = {};
    ASSERT_TRUE(b.Recv(0, odd_in, 5).ok());
    ASSERT_EQ(odd_in[4], 5);
  }
  t.join();
}

// Ranks bound to the same single CPU know it of each other (no shared single copy between them: they never
// copy at once); unbound ranks, or ranks on different CPUs, do not claim it.
TEST(ShmTransport, PairsKnowWhenBothAreBoundToOneCpu) {
  cpu_set_t saved;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(saved), &saved), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &saved)) ++cpu;
  ASSERT_LT(cpu, CPU_SETSIZE);
  CPU_SET(cpu, &one);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(one), &one), 0);
  {
    auto doms = MakeShm(2, 4096);  // both segments created by this thread, bound to `cpu`
    EXPECT_TRUE(doms[0]->pair(1)->capabilities().single_copy->SharesCpuWithPeer());
    EXPECT_TRUE(doms[1]->pair(0)->capabilities().single_copy->SharesCpuWithPeer());
  }
  ASSERT_EQ(::sched_setaffinity(0, sizeof(saved), &saved), 0);
  if (CPU_COUNT(&saved) > 1) {
    auto doms = MakeShm(2, 4096);  // not bound to one CPU: cannot tell, so no
    EXPECT_FALSE(doms[0]->pair(1)->capabilities().single_copy->SharesCpuWithPeer());
    EXPECT_FALSE(doms[1]->pair(0)->capabilities().single_copy->SharesCpuWithPeer());
  }
}

ShmOptions SingleCopyFrom(size_t min_bytes) {
  ShmOptions o;
  o.single_copy = true;
  o.single_copy_min_bytes = min_bytes;
  o.single_copy_max_bytes = 1u << 20;  // the tests' window, independent of the tuned default
  return o;
}

// The single-copy window follows what a process_vm_readv costs here (cma_cost.h): the measurement works (a kernel
// copy is never cheaper than a tenth of a memcpy, nor free), and a machine whose kernel copies are expensive
// next to memcpy single-copies only large messages; the boundary ratio itself counts as cheap.
TEST(ShmTransport, SingleCopyCostIsMeasuredAndSetsTheWindow) {
  const double ratio = SingleCopyCostRatio();
  EXPECT_GT(ratio, 0.1) << "process_vm_readv of this process's own memory was refused or mis-timed";
  EXPECT_LT(ratio, 1000) << "a 64 KiB process_vm_readv timed as more than 1000 memcpys";
  EXPECT_EQ(SingleCopyMinBytes(2.0, false), 8u << 10);
  EXPECT_EQ(SingleCopyMinBytes(2.0, true), 16u << 10);
  EXPECT_EQ(SingleCopyMinBytes(kExpensiveSingleCopyRatio, false), 8u << 10);
  EXPECT_EQ(SingleCopyMinBytes(0, false), 8u << 10);  // unknown: as on a cheap machine
  EXPECT_EQ(SingleCopyMinBytes(kExpensiveSingleCopyRatio + 0.5, false), 4u << 20);
  EXPECT_EQ(SingleCopyMinBytes(kExpensiveSingleCopyRatio + 0.5, true), 8u << 20);
}

// Single copy over worlds 2-5: messages at and above the threshold are read straight from the sender (every
// rank's output checked, counted in stats), smaller ones stream through a ring smaller than the large ones.

TEST(ShmTransport, SingleCopyRingExchange) {
  for (int n : {2, 3, 4, 5}) {
    auto doms = MakeShm(n, 4096, {SingleCopyFrom(1024)});
    for (int r = 0; r < n; ++r) {
      for (int p = 0; p < n; ++p) {
        if (p != r) {
          EXPECT_TRUE(doms[static_cast<size_t>(r)]->SingleCopyStatus(p).ok()) << n;
        }
      }
    }
    auto eps = Endpoints(doms);
    RingExchange(eps, 1 << 20);
    RingExchange(eps, 1024);
    RingExchange(eps, 1023);
    RingExchange(eps, 0);
    RingExchange(eps, 100003);
    RingExchange(eps, (1 << 20) + 16);  // above single_copy_max_bytes: the ring
    for (int r = 0; r < n; ++r) EXPECT_EQ(eps[static_cast<size_t>(r)]->stats().single_copy_recvs, 3u) << n << " " << r;
  }
}

// Receive-and-forward along a chain 0 -> 1 -> 2: rank 1 first sends a message of its own, then forwards what it
// receives (plain, and reduced with a local operand), into a stream region (non-temporal stores) or not, with
// messages larger than the 4 KiB ring (the forward is gated and catches up) and small ones (one frame). Every
// rank's data is checked; with messages below the ring size part of the forwarded bytes come from the cache.
TEST(ShmTransport, ForwardAlongAChain) {
  for (bool stream : {false, true}) {
    auto doms = MakeShm(3, 4096);
    auto eps = Endpoints(doms);
    ASSERT_NE(eps[1]->capabilities().forward, nullptr);
    const Combiner add{8, AddInt64, 0, 0};
    // 24 and 800 bytes travel as one frame (no forwarding from the cache: the forward follows the whole frame);
    // 1600 bytes fit the ring beside rank 1's own message, so part of the forward goes from the cache.
    for (size_t count : {size_t{0}, size_t{3}, size_t{100}, size_t{200}, size_t{1000}, size_t{10007}}) {
      const size_t bytes = count * 8;
      std::vector<int64_t> sent(count), own(count), local(count), mid_plain(count), mid_sum(count);
      std::vector<int64_t> got_own(count), got_plain(count), got_sum(count);
      for (size_t i = 0; i < count; ++i) {
        sent[i] = static_cast<int64_t>(i * 7919 + 3);
        own[i] = -static_cast<int64_t>(i);
        local[i] = static_cast<int64_t>(i % 13) * 1000;
      }
      if (stream) {
        eps[1]->SetStreamRegion({reinterpret_cast<const char*>(mid_sum.data()), bytes});
      }
      std::thread r0([&] {
        EXPECT_TRUE(eps[0]->Send(1, sent.data(), bytes).ok());
        EXPECT_TRUE(eps[0]->Send(1, sent.data(), bytes).ok());
      });
      std::thread r2([&] {
        const OpHandle a = eps[2]->Irecv(1, got_own.data(), bytes);
        const OpHandle b = eps[2]->Irecv(1, got_plain.data(), bytes);
        const OpHandle c = eps[2]->Irecv(1, got_sum.data(), bytes);
        EXPECT_TRUE(eps[2]->Wait(a).ok());
        EXPECT_TRUE(eps[2]->Wait(b).ok());
        EXPECT_TRUE(eps[2]->Wait(c).ok());
      });
      OpHandle s1 = 0, s2 = 0;
      const OpHandle mine = eps[1]->Isend(2, own.data(), bytes);
      const OpHandle h1 = eps[1]->IrecvForward(0, mid_plain.data(), nullptr, bytes, nullptr, 2, &s1);
      const OpHandle h2 = eps[1]->IrecvForward(0, mid_sum.data(), local.data(), bytes, &add, 2, &s2);
      EXPECT_TRUE(eps[1]->WaitAll().ok());
      EXPECT_TRUE(eps[1]->Wait(mine).ok() && eps[1]->Wait(h1).ok() && eps[1]->Wait(h2).ok());
      EXPECT_TRUE(eps[1]->Wait(s1).ok() && eps[1]->Wait(s2).ok());
      r0.join();
      r2.join();
      eps[1]->SetStreamRegion({});
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(got_own[i], own[i]) << count << " " << i;
        ASSERT_EQ(mid_plain[i], sent[i]) << count << " " << i;
        ASSERT_EQ(got_plain[i], sent[i]) << count << " " << i;
        ASSERT_EQ(mid_sum[i], sent[i] + local[i]) << count << " " << i;
        ASSERT_EQ(got_sum[i], sent[i] + local[i]) << count << " " << i;
      }
    }
    // 6 messages of each kind per direction; some forwarded bytes went straight from the cache.
    EXPECT_EQ(eps[1]->stats().sends, 18u);
    EXPECT_EQ(eps[1]->stats().recvs, 12u);
    EXPECT_GT(eps[1]->stats().forwarded_from_cache, 0u) << stream;
    EXPECT_LE(eps[1]->stats().forwarded_from_cache, 2 * 8u * (3 + 100 + 200 + 1000 + 10007)) << stream;
  }
}

// Shared single copy at the pair level, both ways the front part can go: the writer claims it (its
// process_vm_writev puts the bytes in the reader's buffer) or the reader takes it before the writer looks (the
// writer then leaves it alone). Ranks are two domains of this process, so both copies target our own pid.
TEST(ShmTransport, SharedSingleCopyFrontPart) {
  auto doms = MakeShm(2, 4096, {SingleCopyFrom(1024)});
  SingleCopyLink* writer = doms[0]->pair(1)->capabilities().single_copy;  // rank 0's link to rank 1
  SingleCopyLink* reader = doms[1]->pair(0)->capabilities().single_copy;
  ASSERT_TRUE(writer != nullptr && reader != nullptr);
  ASSERT_TRUE(reader->PeerCanWriteMemory());
  std::vector<uint8_t> src(8192), dst(8192, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 13 + 1);
  const uint64_t remote = reinterpret_cast<uintptr_t>(src.data());
  // Ticket 1: the writer serves.
  ASSERT_EQ(reader->NextReadTicket(), 1u);
  reader->RequestPeerWrite(1, dst.data(), 4096);
  EXPECT_FALSE(writer->ServePeerWrite(2, src.data()));  // another message's ticket: not this request
  EXPECT_TRUE(writer->ServePeerWrite(1, src.data()));
  EXPECT_FALSE(writer->ServePeerWrite(1, src.data()));  // claimed once
  auto done = reader->CompletePeerWrite(1, remote, dst.data(), 4096);
  ASSERT_TRUE(done.ok() && *done);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + 4096, dst.begin()));
  EXPECT_TRUE(std::all_of(dst.begin() + 4096, dst.end(), [](uint8_t b) { return b == 0; }));
  reader->AckPeerRead();
  // Ticket 2: the reader takes the front part first; a late writer does nothing.
  std::fill(dst.begin(), dst.end(), 0);
  ASSERT_EQ(reader->NextReadTicket(), 2u);
  reader->RequestPeerWrite(2, dst.data(), 8192);
  done = reader->CompletePeerWrite(2, remote, dst.data(), 8192);
  ASSERT_TRUE(done.ok() && *done);
  EXPECT_EQ(src, dst);
  std::fill(dst.begin(), dst.end(), 0);
  EXPECT_FALSE(writer->ServePeerWrite(2, src.data()));
  EXPECT_TRUE(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; }));
}

// Shared single copy through endpoints: large single-copy messages (the front half possibly written by the
// sender while it waits) arrive intact at every size, odd sizes included, in both directions at once.
TEST(ShmTransport, SharedSingleCopyExchange) {
  ShmOptions o = SingleCopyFrom(1024);
  o.single_copy_max_bytes = SIZE_MAX;
  auto doms = MakeShm(2, 4096, {o});
  auto eps = Endpoints(doms);
  for (size_t bytes : {size_t{65536}, size_t{100003}, size_t{1} << 20, (size_t{4} << 20) + 4093}) {
    RingExchange(eps, bytes);
  }
  EXPECT_EQ(eps[0]->stats().single_copy_recvs, 4u);
  EXPECT_EQ(eps[1]->stats().single_copy_recvs, 4u);
}

// A receiver that went to sleep on its doorbell is woken by the sender's message, not by its 50 ms sleep slice
// running out: whichever barrier protocol the doorbell uses (membarrier-based or a fence per notification), a
// lost wake-up would show here as ~50 ms. Median of 9 trials, each with the send 20 ms after the receive.
TEST(ShmTransport, SleepingReceiverIsWokenBySend) {
  auto doms = MakeShm(2, 4096);
  auto eps = Endpoints(doms);
  std::vector<double> late_ms;
  for (int trial = 0; trial < 9; ++trial) {
    int64_t got = 0;
    const int64_t sent = trial + 1;
    std::atomic<int64_t> send_ns{0};
    std::thread sender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      send_ns = std::chrono::steady_clock::now().time_since_epoch().count();
      EXPECT_TRUE(eps[0]->Send(1, &sent, sizeof(sent)).ok());
    });
    ASSERT_TRUE(eps[1]->Recv(0, &got, sizeof(got)).ok());
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    sender.join();
    EXPECT_EQ(got, sent);
    late_ms.push_back(static_cast<double>(now - send_ns.load()) / 1e6);
  }
  std::sort(late_ms.begin(), late_ms.end());
  EXPECT_LT(late_ms[late_ms.size() / 2], 10.0) << "median wake-up after the send, ms";
}

// Two endpoints over the same pairs (as a communicator's sub-groups share them) take turns: acknowledgements
// are counted per pair, so the second endpoint's send is not completed by the first one's acknowledgement.
TEST(ShmTransport, SingleCopyEndpointsSharePairs) {
  auto doms = MakeShm(2, 4096, {SingleCopyFrom(1024)});
  auto first = Endpoints(doms), second = Endpoints(doms);
  for (int round = 0; round < 3; ++round) {
    RingExchange(first, 8192 + static_cast<size_t>(round));
    RingExchange(second, 4096 + static_cast<size_t>(round));
  }
  EXPECT_EQ(first[0]->stats().single_copy_recvs, 3u);
  EXPECT_EQ(second[1]->stats().single_copy_recvs, 3u);
}

// Receive-and-reduce from the sender's memory, out of place and in place, whole and odd element counts.
TEST(ShmTransport, SingleCopyRecvReduce) {
  auto doms = MakeShm(2, 4096, {SingleCopyFrom(1024)});
  StreamEndpoint a(0, ShmPairs(*doms[0], 2, 0), doms[0]->doorbell(), absl::Seconds(20));
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Seconds(20));
  const Combiner add{8, AddInt64, 0, 0};
  for (size_t count : {size_t{128}, size_t{10007}, size_t{100003}}) {
    std::vector<int64_t> sent(count), local(count), out(count, -1), inplace(count);
    for (size_t i = 0; i < count; ++i) {
      sent[i] = static_cast<int64_t>(i * 1000003 + 7);
      local[i] = static_cast<int64_t>(i) - 5;
      inplace[i] = local[i];
    }
    std::thread t([&] {
      EXPECT_TRUE(a.Send(1, sent.data(), count * 8).ok());
      EXPECT_TRUE(a.Send(1, sent.data(), count * 8).ok());
    });
    const OpHandle h1 = b.IrecvReduce(0, out.data(), local.data(), count * 8, &add);
    const OpHandle h2 = b.IrecvReduce(0, inplace.data(), inplace.data(), count * 8, &add);
    EXPECT_TRUE(b.Wait(h1).ok());
    EXPECT_TRUE(b.Wait(h2).ok());
    t.join();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], sent[i] + local[i]) << count << " element " << i;
      ASSERT_EQ(inplace[i], sent[i] + local[i]) << count << " element " << i;
    }
  }
  EXPECT_EQ(b.stats().single_copy_recvs, 6u);
}

// Fallbacks: a rank with single copy off reads through the ring and says why; its peer still reads it by
// single copy (the choice is per direction and per message, the header says which).
TEST(ShmTransport, SingleCopyFallbackPerDirection) {
  ShmOptions off = SingleCopyFrom(1024);
  off.single_copy = false;
  auto doms = MakeShm(3, 4096, {off, SingleCopyFrom(1024), SingleCopyFrom(1024)});
  const absl::Status why = doms[0]->SingleCopyStatus(1);
  ASSERT_FALSE(why.ok());
  EXPECT_NE(why.message().find("HCCL_TUNE_SINGLE_COPY=off"), std::string::npos) << why;
  EXPECT_TRUE(doms[1]->SingleCopyStatus(0).ok());
  EXPECT_EQ(doms[1]->SingleCopyStatus(7).code(), absl::StatusCode::kNotFound);
  auto eps = Endpoints(doms);
  RingExchange(eps, 50000);  // 0 -> 1 -> 2 -> 0: rank 0 receives through the ring
  EXPECT_EQ(eps[0]->stats().single_copy_recvs, 0u);
  EXPECT_EQ(eps[1]->stats().single_copy_recvs, 1u);
  EXPECT_EQ(eps[2]->stats().single_copy_recvs, 1u);
}

// Several single-copy sends posted back to back all put their descriptors in the stream at once: the peer
// reads every one of them while the sender has not called Wait yet (it is busy with local work, as a ring
// allgather copying its own block), instead of the second waiting for the first's acknowledgement.
TEST(ShmTransport, SingleCopyQueuedSendsDoNotWaitForAcks) {
  auto doms = MakeShm(2, 4096, {SingleCopyFrom(1024)});
  StreamEndpoint a(0, ShmPairs(*doms[0], 2, 0), doms[0]->doorbell(), absl::Seconds(20));
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Seconds(20));
  CallDescriptor gather{3, Collective::kAllgather, DataType::kUint8, ReduceOp::kSum, 3 * 70000, 0};
  a.SetCall(gather);
  b.SetCall(gather);
  std::vector<std::vector<uint8_t>> sent(3), got(3, std::vector<uint8_t>(70000, 0));
  for (size_t i = 0; i < 3; ++i) {
    sent[i].resize(70000);
    for (size_t k = 0; k < sent[i].size(); ++k) sent[i][k] = static_cast<uint8_t>(k * 7 + i * 31 + 1);
  }
  std::vector<OpHandle> sends;
  for (size_t i = 0; i < 3; ++i) sends.push_back(a.Isend(1, sent[i].data(), sent[i].size()));
  std::atomic<bool> received{false};
  std::thread reader([&] {
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(b.Recv(0, got[i].data(), got[i].size()).ok()) << i;
    received = true;
  });
  // The sender does not progress until the reader has everything (bounded: a regression fails, not hangs).
  for (int i = 0; i < 2000 && !received; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(received.load()) << "the reader could not read all three messages while the sender was busy";
  for (OpHandle h : sends) EXPECT_TRUE(a.Wait(h).ok());
  reader.join();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i], sent[i]) << i;
  EXPECT_EQ(b.stats().single_copy_recvs, 3u);
}

// Reducing collectives never single-copy (they combine straight out of the ring); the others do at every size
// from the threshold up.
TEST(ShmTransport, SingleCopyOnlyForNonReducingCollectives) {
  ShmOptions from_1k;
  from_1k.single_copy_min_bytes = 1024;  // the default window's upper end (none)
  auto doms = MakeShm(2, 1 << 16, {from_1k});
  StreamEndpoint a(0, ShmPairs(*doms[0], 2, 0), doms[0]->doorbell(), absl::Seconds(20));
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Seconds(20));
  const size_t big = (8u << 20) + 16;
  std::vector<uint8_t> x(big), y(big, 0);
  for (size_t k = 0; k < big; ++k) x[k] = static_cast<uint8_t>(k * 13 + 5);
  uint32_t seq = 1;
  for (Collective c : {Collective::kAllreduce, Collective::kReducescatter, Collective::kReduce, Collective::kBroadcast,
                       Collective::kAllgather, Collective::kAlltoall}) {
    CallDescriptor call{seq++, c, DataType::kUint8, ReduceOp::kSum, big, 0};
    a.SetCall(call);
    b.SetCall(call);
    b.ResetStats();
    std::fill(y.begin(), y.end(), 0);
    std::thread t([&] { EXPECT_TRUE(a.Send(1, x.data(), x.size()).ok()); });
    EXPECT_TRUE(b.Recv(0, y.data(), y.size()).ok());
    t.join();
    EXPECT_EQ(y, x) << CollectiveName(c);
    EXPECT_EQ(b.stats().single_copy_recvs, IsReducing(c) ? 0u : 1u) << CollectiveName(c);
  }
}

// Point-to-point sends stay eager (into the ring) so a blocking Send completes before the peer's Recv.
TEST(ShmTransport, SingleCopyNotForPointToPoint) {
  auto doms = MakeShm(2, 1 << 20, {SingleCopyFrom(1024)});
  StreamEndpoint a(0, ShmPairs(*doms[0], 2, 0), doms[0]->doorbell(), absl::Seconds(20));
  StreamEndpoint b(1, ShmPairs(*doms[1], 2, 1), doms[1]->doorbell(), absl::Seconds(20));
  CallDescriptor p2p{1, Collective::kSendRecv, DataType::kUint8, ReduceOp::kSum, 65536, 0};
  a.SetCall(p2p);
  b.SetCall(p2p);
  std::vector<uint8_t> x(65536, 5), y(65536, 0);
  ASSERT_TRUE(a.Send(1, x.data(), x.size()).ok());  // completes with no receiver
  ASSERT_TRUE(b.Recv(0, y.data(), y.size()).ok());
  EXPECT_EQ(y, x);
  EXPECT_EQ(b.stats().single_copy_recvs, 0u);
}

TEST(TcpTransport, RingWithChannels) {
  for (int channels : {1, 3}) {
    const int n = 3;
    std::vector<std::unique_ptr<TcpDomain>> doms;
    std::map<int, TcpPeerInfo> infos;
    for (int r = 0; r < n; ++r) {
      auto d = TcpDomain::Create(r, 42, "", absl::Seconds(10));
      ASSERT_TRUE(d.ok()) << d.status();
      infos[r] = TcpPeerInfo{(*d)->port(), (*d)->interfaces(), true};
      doms.push_back(*std::move(d));
    }
    for (auto& d : doms) d->SetPeers(infos);
    std::vector<std::unique_ptr<StreamEndpoint>> eps(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        auto pairs = doms[static_cast<size_t>(r)]->Connect({0, 1, 2}, "", channels);
        ASSERT_TRUE(pairs.ok()) << pairs.status();
        pairs->resize(n);
        eps[static_cast<size_t>(r)] = std::make_unique<StreamEndpoint>(r, *pairs, nullptr, absl::Seconds(20));
      });
    }
    for (auto& t : threads) t.join();
    RingExchange(eps, 3 << 20);
    RingExchange(eps, 1);
  }
}

// Every TCP pair reports the communicator's ranks on this node (Pair::HostRanks), so the endpoint's waits know
// when ranks outnumber the CPUs; and a forward send that has sent everything its receive has stored so far waits
// for that receive, not on its (writable) socket: rank 1's wait for a message that rank 0 sends 400 ms late
// sleeps in poll() instead of spinning through it (its thread's CPU time stays far below the wait).
TEST(TcpTransport, PairsKnowHostRanksAndForwardWaitsSleep) {
  const int n = 3;
  std::vector<std::unique_ptr<TcpDomain>> doms;
  std::map<int, TcpPeerInfo> infos;
  for (int r = 0; r < n; ++r) {
    auto d = TcpDomain::Create(r, 43, "", absl::Seconds(10));
    ASSERT_TRUE(d.ok()) << d.status();
    infos[r] = TcpPeerInfo{(*d)->port(), (*d)->interfaces(), true};
    doms.push_back(*std::move(d));
  }
  for (int r = 0; r < n; ++r) {
    auto peers = infos;
    if (r == 0) peers[2].same_node = false;  // rank 0 counts rank 2 on another node
    doms[static_cast<size_t>(r)]->SetPeers(peers);
  }
  std::vector<std::unique_ptr<StreamEndpoint>> eps(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto pairs = doms[static_cast<size_t>(r)]->Connect({0, 1, 2}, "", 1);
      ASSERT_TRUE(pairs.ok()) << pairs.status();
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        EXPECT_EQ((*pairs)[static_cast<size_t>(p)]->HostRanks(), r == 0 ? 2 : 3) << r << "->" << p;
      }
      pairs->resize(n);
      eps[static_cast<size_t>(r)] = std::make_unique<StreamEndpoint>(r, *pairs, nullptr, absl::Seconds(20));
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(eps[0] && eps[1] && eps[2]);
  const size_t count = 1 << 16;
  std::vector<uint32_t> sent(count), mid(count), got(count);
  for (size_t i = 0; i < count; ++i) sent[i] = static_cast<uint32_t>(i * 2654435761u);
  const auto late = absl::Milliseconds(400);
  std::thread r0([&] {
    absl::SleepFor(late);
    EXPECT_TRUE(eps[0]->Send(1, sent.data(), count * 4).ok());
  });
  std::thread r2([&] { EXPECT_TRUE(eps[2]->Recv(1, got.data(), count * 4).ok()); });
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  OpHandle fwd = 0;
  const OpHandle h = eps[1]->IrecvForward(0, mid.data(), nullptr, count * 4, nullptr, 2, &fwd);
  EXPECT_TRUE(eps[1]->Wait(h).ok());
  EXPECT_TRUE(eps[1]->Wait(fwd).ok());
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  r0.join();
  r2.join();
  EXPECT_EQ(mid, sent);
  EXPECT_EQ(got, sent);
  const double cpu_ms = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
  EXPECT_LT(cpu_ms, absl::ToDoubleMilliseconds(late) / 10) << "rank 1 spun while it waited for rank 0";
}

// The data listener binds each published address (never the wildcard) on one port inside the range; a second
// domain in a one-port range that the first holds fails naming the range.
TEST(TcpTransport, ListensOnPublishedAddressesInsideThePortRange) {
  const int lo = 30000 + static_cast<int>(::getpid() % 20000);
  auto a = TcpDomain::Create(0, 42, "", absl::Seconds(10), std::make_pair(lo, lo + 7));
  ASSERT_TRUE(a.ok()) << a.status();
  const int port = (*a)->port();
  EXPECT_GE(port, lo);
  EXPECT_LE(port, lo + 7);
  ASSERT_FALSE((*a)->interfaces().empty());
  auto b = TcpDomain::Create(1, 42, "", absl::Seconds(10), std::make_pair(port, port));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(absl::StrCat("no free port in HCCL_TUNE_PORT_RANGE ", port, "-", port, " on ")),
            std::string::npos)
      << b.status();
  EXPECT_NE(b.status().message().find("127.0.0.1"), std::string::npos) << b.status();
}

TEST(Stores, MemoryFileTcpBehaveAlike) {
  char dir[] = "/tmp/hccltune-store-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok()) << server.status();
  auto tcp = ConnectTcpStore("127.0.0.1", (*server)->port(), absl::Seconds(5));
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  auto file = NewFileStore(dir);
  ASSERT_TRUE(file.ok());
  std::vector<std::shared_ptr<Store>> stores = {NewMemoryStore(), *file, *tcp, NewPrefixStore(NewMemoryStore(), "p")};
  for (auto& s : stores) {
    ASSERT_TRUE(s->Set("a", "1").ok());
    EXPECT_EQ(*s->Get("a", absl::Seconds(1)), "1");
    EXPECT_EQ(*s->Add("n", 5), 5);
    EXPECT_EQ(*s->Add("n", -2), 3);
    EXPECT_TRUE(*s->Check({"a", "n"}));
    EXPECT_FALSE(*s->Check({"a", "missing"}));
    auto late = s->Get("missing", absl::Milliseconds(50));
    ASSERT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_NE(late.status().message().find("missing"), std::string::npos);
    std::thread setter([&] {
      absl::SleepFor(absl::Milliseconds(20));
      (void)s->Set("later", "x");
    });
    EXPECT_TRUE(s->Wait({"later"}, absl::Seconds(5)).ok());
    setter.join();
  }
}

TEST(Stores, TcpClientRefusesForeignServer) {
  // A listener that answers garbage: not our protocol.
  auto server = TcpStoreServer::Start("127.0.0.1", 0);
  ASSERT_TRUE(server.ok());
  auto none = ConnectTcpStore("127.0.0.1", 1, absl::Milliseconds(100));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDeadlineExceeded) << none.status();
}

}  // namespace
}  // namespace hccltune

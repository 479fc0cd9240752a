// In-place return over the shm transport (ReturnLink::BeginReturns, Endpoint::IsendReturn / IrecvReduceReturn): the
// pair protocol on its own, then two endpoints reducing each other's messages through rings smaller than the
// messages, periods back to back and between plain messages, and a return message matched with a plain one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"
#include "tests/unit/shm_fixture.h"

namespace hccltune {
namespace {

using shmtest::AddInt64;
using shmtest::Endpoints;
using shmtest::MakeShm;

// One thread drives both sides: the writer streams 3 x 4096 + 40 bytes through a 4 KiB ring, the reader rewrites
// every byte it peeks (its "result") and consumes, the writer takes the rewritten bytes back; no byte may be
// written over before it came back. Then a plain message, then a second period: the ring's positions agree.
TEST(ShmReturn, PairReturnsRewrittenBytesInOrder) {
  auto doms = MakeShm(2, 4096);
  Pair& w = *doms[0]->pair(1);
  Pair& r = *doms[1]->pair(0);
  const PairCapabilities wc = w.capabilities(), rc = r.capabilities();
  ASSERT_TRUE(wc.returns != nullptr && rc.returns != nullptr && rc.ring != nullptr);
  ReturnLink& w_back = *wc.returns;
  ReturnLink& r_back = *rc.returns;
  RingReads& r_ring = *rc.ring;
  for (int period = 0; period < 2; ++period) {
    w_back.BeginReturns();
    r_back.BeginReturns();
    const size_t total = 3 * 4096 + 40;
    std::vector<uint8_t> sent(total), back;
    for (size_t i = 0; i < total; ++i) sent[i] = static_cast<uint8_t>(i * 31 + period);
    size_t written = 0;
    int idle = 0;
    while (back.size() < total && idle < 1000) {
      bool moved = false;
      auto n = w.TryWrite(0, sent.data() + written, std::min<size_t>(total - written, 1000));
      ASSERT_TRUE(n.ok());
      written += *n;
      moved = moved || *n > 0;
      const void* in = nullptr;
      size_t avail = 0;
      ASSERT_TRUE(r_ring.Peek(0, &in, &avail));
      avail = std::min<size_t>(avail, 700);
      for (size_t i = 0; i < avail; ++i) static_cast<uint8_t*>(const_cast<void*>(in))[i] ^= 0xff;
      r_ring.Consume(0, avail);
      moved = moved || avail > 0;
      const void* ret = nullptr;
      size_t got = 0;
      ASSERT_TRUE(w_back.PeekReturned(&ret, &got));
      back.insert(back.end(), static_cast<const uint8_t*>(ret), static_cast<const uint8_t*>(ret) + got);
      w_back.TakeReturned(got);
      moved = moved || got > 0;
      idle = moved ? 0 : idle + 1;
    }
    ASSERT_EQ(back.size(), total) << "period " << period;
    for (size_t i = 0; i < total; ++i) ASSERT_EQ(back[i], static_cast<uint8_t>(sent[i] ^ 0xff)) << i;
    r_back.EndReturns();
    w_back.EndReturns();
    // A plain message after the period: written where the period ended, read from there, freed by the reader.
    const char msg[5] = {'h', 'e', 'l', 'l', 'o'};
    char got[5] = {};
    ASSERT_EQ(*w.TryWrite(0, msg, 5), 5u);
    ASSERT_EQ(*r.TryRead(0, got, 5), 5u);
    EXPECT_EQ(std::memcmp(msg, got, 5), 0);
    // The whole ring is free again.
    std::vector<uint8_t> fill(4096, 1);
    size_t room = 0;
    while (true) {
      auto n = w.TryWrite(0, fill.data(), fill.size() - room);
      ASSERT_TRUE(n.ok());
      if (*n == 0) break;
      room += *n;
    }
    EXPECT_EQ(room, 4096u);
    std::vector<uint8_t> drain(4096);
    EXPECT_EQ(*r.TryRead(0, drain.data(), drain.size()), 4096u);
  }
}

// Two endpoints, each sending its own half with IsendReturn and reducing the peer's with IrecvReduceReturn,
// through 4 KiB rings: messages of one frame, around the frame limit, and larger than the ring; out of place and
// in place (result over data, out over local); outputs streamed or not; a plain message between periods.
TEST(ShmReturn, EndpointsReduceEachOthersHalves) {
  for (bool stream : {false, true}) {
    auto doms = MakeShm(2, 4096);
    auto eps = Endpoints(doms);
    ASSERT_TRUE(eps[0]->SupportsReturn(1) && eps[1]->SupportsReturn(0));
    const Combiner add{8, AddInt64, 0, 0};
    const std::vector<size_t> counts = {0, 1, 3, 123, 124, 125, 1000, 10007};
    for (bool in_place : {false, true}) {
      for (size_t count : counts) {
        const size_t bytes = count * 8;
        // Rank r's input: two halves of `count`; rank r sends half r and reduces half 1 - r.
        std::vector<std::vector<int64_t>> in(2, std::vector<int64_t>(2 * count)), out(2);
        for (int r = 0; r < 2; ++r) {
          for (size_t i = 0; i < 2 * count; ++i) in[r][i] = static_cast<int64_t>(i * 7919 + 3) * (r == 0 ? 1 : -3) + r;
          out[r].assign(2 * count, -1);
        }
        Combiner cb[2] = {add, add};
        auto run = [&](int r) {
          const int peer = 1 - r;
          std::vector<int64_t>& dst = in_place ? in[r] : out[r];
          const int64_t* src = in[r].data();
          if (stream) {
            // Streamed outputs: the reduced tiles go out with non-temporal stores, the results taken back too.
            eps[r]->SetStreamRegion({reinterpret_cast<const char*>(dst.data()), 2 * bytes});
            cb[r].stream = {reinterpret_cast<const char*>(dst.data()), 2 * bytes};
          }
          const OpHandle s = eps[r]->IsendReturn(peer, src + r * count, bytes, dst.data() + r * count);
          const OpHandle v =
              eps[r]->IrecvReduceReturn(peer, dst.data() + peer * count, src + peer * count, bytes, &cb[r]);
          const absl::Status all = eps[r]->WaitAll();
          EXPECT_TRUE(all.ok()) << all;
          EXPECT_TRUE(eps[r]->Wait(s).ok() && eps[r]->Wait(v).ok());
          // A plain message each way after the period.
          int64_t token = 100 + r, got = 0;
          const OpHandle a = eps[r]->Irecv(peer, &got, 8);
          EXPECT_TRUE(eps[r]->Send(peer, &token, 8).ok());
          EXPECT_TRUE(eps[r]->Wait(a).ok());
          EXPECT_EQ(got, 100 + peer);
        };
        std::vector<std::vector<int64_t>> orig = in;
        std::thread t(run, 1);
        run(0);
        t.join();
        for (int r = 0; r < 2; ++r) {
          const std::vector<int64_t>& got = in_place ? in[r] : out[r];
          for (size_t i = 0; i < 2 * count; ++i) {
            ASSERT_EQ(got[i], orig[0][i] + orig[1][i])
                << "rank " << r << ", " << count << " elements, element " << i << (in_place ? ", in place" : "")
                << (stream ? ", streamed" : "");
          }
        }
        for (auto& ep : eps) ep->SetStreamRegion({});
      }
    }
    uint64_t want = 0;
    for (size_t count : counts) want += 2 * count * 8;  // out of place and in place
    EXPECT_EQ(eps[0]->stats().returned_in_place, want);
    EXPECT_EQ(eps[1]->stats().returned_in_place, want);
  }
}

// Rank r's context for running an algorithm straight on a shm endpoint (one node).
class EndpointContext : public AlgorithmContext {
 public:
  EndpointContext(Endpoint* ep, int n) : ep_(ep) { topo_.node_of.assign(static_cast<size_t>(n), 0); }
  absl::StatusOr<Endpoint*> GetEndpoint(const LinkSpec&) override { return ep_; }
  const GroupTopology& topology() const override { return topo_; }
  int rank() const override { return ep_->rank(); }
  void* Scratch(size_t bytes) override {
    scratch_.resize(bytes);
    return scratch_.data();
  }
  absl::Status RunSubCollective(const CollectiveArgs&, const Configuration&, absl::Span<const int>) override {
    return absl::UnimplementedError("no sub-collectives here");
  }
  absl::StatusOr<Configuration> ChooseStep(Collective, uint64_t, int, int) override {
    return absl::UnimplementedError("no sub-collectives here");
  }

 private:
  Endpoint* ep_;
  GroupTopology topo_;
  std::vector<uint8_t> scratch_;
};

// The 2-rank `ring` allreduce over shm takes the return path (every chunk reduced and returned in place, none
// forwarded), with rings smaller than the buffer; fp32 sum and an fp32 avg (divided at the end: the two-phase
// ring, nothing returned), every element of both ranks checked.
TEST(ShmReturn, TwoRankRingAllreduceReturnsEveryChunk) {
  auto doms = MakeShm(2, 64u << 10);
  auto eps = Endpoints(doms);
  auto config = Configuration::Parse("ring(chunk=16K)");
  ASSERT_TRUE(config.ok()) << config.status();
  const size_t count = 100003;  // 400 KiB: 13 chunks per half, the last one short
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    std::vector<std::vector<float>> in(2, std::vector<float>(count)), out(2, std::vector<float>(count, -1));
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < count; ++i) in[r][i] = static_cast<float>((i * 13 + static_cast<size_t>(r) * 7) % 1000);
    }
    const uint64_t before = eps[0]->stats().returned_in_place + eps[1]->stats().returned_in_place;
    auto run = [&](int r) {
      EndpointContext ctx(eps[r].get(), 2);
      CollectiveArgs args;
      args.send = in[r].data();
      args.recv = out[r].data();
      args.count = count;
      args.op = op;
      const absl::Status s = registry::Run(args, *config, ctx);
      EXPECT_TRUE(s.ok()) << "rank " << r << ": " << s;
    };
    std::thread t(run, 1);
    run(0);
    t.join();
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < count; ++i) {
        const float sum = in[0][i] + in[1][i];
        ASSERT_EQ(out[r][i], op == ReduceOp::kAvg ? sum / 2 : sum) << "rank " << r << ", element " << i;
      }
    }
    const uint64_t returned = eps[0]->stats().returned_in_place + eps[1]->stats().returned_in_place - before;
    EXPECT_EQ(returned, op == ReduceOp::kSum ? count * 4 : 0u) << ReduceOpName(op);
  }
}

// A message to reduce and return matched with a plain receive, and a plain message matched with a receive that
// would return: the receiver names the mismatch; the sender waiting for its result times out naming the peer.
TEST(ShmReturn, ReturnMatchedWithPlainIsNamed) {
  for (bool sender_returns : {true, false}) {
    auto doms = MakeShm(2, 4096);
    auto eps = Endpoints(doms);
    eps[0]->SetTimeout(absl::Milliseconds(300));
    const Combiner add{8, AddInt64, 0, 0};
    std::vector<int64_t> data(100, 1), result(100), out(100), local(100, 2);
    absl::Status sent;
    std::thread t([&] {
      sent = sender_returns ? eps[0]->Wait(eps[0]->IsendReturn(1, data.data(), 800, result.data()))
                            : eps[0]->Send(1, data.data(), 800);
    });
    const absl::Status got = sender_returns
                                 ? eps[1]->Wait(eps[1]->IrecvReduce(0, out.data(), local.data(), 800, &add))
                                 : eps[1]->Wait(eps[1]->IrecvReduceReturn(0, out.data(), local.data(), 800, &add));
    t.join();
    EXPECT_EQ(got.code(), absl::StatusCode::kFailedPrecondition) << got;
    EXPECT_NE(got.message().find(sender_returns ? "rank 0 sent a message to reduce and return in place where rank 1 "
                                                  "expected a plain one"
                                                : "rank 0 sent a plain message where rank 1 expected one to reduce and "
                                                  "return in place"),
              std::string::npos)
        << got;
    if (sender_returns) {
      EXPECT_EQ(sent.code(), absl::StatusCode::kDeadlineExceeded) << sent;
      EXPECT_NE(sent.message().find("rank 1"), std::string::npos) << sent;
    } else {
      EXPECT_TRUE(sent.ok()) << sent;  // a plain send completes once in the ring
    }
  }
}

// A plain operation with a peer while return operations with it are pending would have its frame returned and
// taken for a result: refused, the endpoint broken with an error that says so (nothing waits).
TEST(ShmReturn, PlainOperationDuringAPeriodIsRefused) {
  for (bool send : {true, false}) {
    auto doms = MakeShm(2, 4096);
    auto eps = Endpoints(doms);
    std::vector<int64_t> data(10, 1), result(10);
    int64_t plain = 0;
    eps[0]->IsendReturn(1, data.data(), 80, result.data());
    if (send) {
      eps[0]->Isend(1, &plain, 8);
    } else {
      eps[0]->Irecv(1, &plain, 8);
    }
    const absl::Status s = eps[0]->WaitAll();
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_NE(s.message().find(send ? "a plain send to rank 1 was posted while in-place return operations with it "
                                      "are pending"
                                    : "a plain receive from rank 1 was posted while in-place return operations with "
                                      "it are pending"),
              std::string::npos)
        << s;
  }
}

}  // namespace
}  // namespace hccltune

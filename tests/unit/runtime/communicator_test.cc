// Every collective and algorithm through the real Communicator (shm and TCP), ranks as threads; references
// from tuner/bench/check (independent of the runtime).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "hccltune/version.h"
#include "runtime/algorithms/registry.h"
#include "runtime/common/configuration.h"
#include "runtime/common/sizes.h"
#include "tests/unit/common/thp_region.h"
#include "tests/unit/runtime/rank_fixture.h"
#include "tuner/bench/check.h"

namespace hccltune {
namespace {

using bench::CheckCase;
using testing::AnonHugeKb;
using testing::RunRanks;
using testing::ThpRegion;

// Runs one checked call of `config` on this rank; returns a mismatch as an error.
absl::Status CheckedCall(Communicator& comm, const CheckCase& c, const std::string& config, bool in_place) {
  const size_t es = DataTypeSize(c.dtype);
  const size_t n = static_cast<size_t>(c.world);
  std::vector<uint8_t> send(std::max<size_t>(1, std::max(bench::SendElements(c), c.count) * es));
  std::vector<uint8_t> recv(std::max<size_t>(1, std::max(bench::RecvElements(c), c.count * n) * es), 0xcd);
  bench::FillInput(c, send.data());
  std::vector<size_t> counts(n, c.count), displs(n);
  for (size_t i = 0; i < n; ++i) displs[i] = i * c.count;
  CallOptions o;
  o.config = config;
  absl::Status s;
  const void* sp = send.data();
  void* rp = recv.data();
  if (in_place) {
    // In place: the input sits where the API expects it inside recv.
    switch (c.collective) {
      case Collective::kAllreduce:
      case Collective::kBroadcast:
        std::memcpy(recv.data(), send.data(), c.count * es);
        sp = rp;
        break;
      case Collective::kAllgather:
        std::memcpy(recv.data() + static_cast<size_t>(c.rank) * c.count * es, send.data(), c.count * es);
        sp = recv.data() + static_cast<size_t>(c.rank) * c.count * es;
        break;
      case Collective::kReducescatter:
        // recv points at block r inside send; the result is checked from there.
        rp = send.data() + static_cast<size_t>(c.rank) * c.count * es;
        break;
      case Collective::kReduce:
        // The root's input in recv; the other ranks keep their own send (their recv is not written).
        if (c.rank == c.root) {
          std::memcpy(recv.data(), send.data(), c.count * es);
          sp = rp;
        }
        break;
      default: break;
    }
  }
  // Out of place the input is read only (several algorithms read send as an operand instead of copying it).
  const std::vector<uint8_t> input = in_place ? std::vector<uint8_t>{} : send;
  switch (c.collective) {
    case Collective::kAllreduce: s = comm.Allreduce(sp, rp, c.count, c.dtype, c.op, o); break;
    case Collective::kAllgather: s = comm.Allgather(sp, rp, c.count, c.dtype, o); break;
    case Collective::kAllgatherv: s = comm.Allgatherv(sp, rp, counts, displs, c.dtype, o); break;
    case Collective::kReducescatter: s = comm.Reducescatter(sp, rp, c.count, c.dtype, c.op, o); break;
    case Collective::kBroadcast: s = comm.Broadcast(sp, rp, c.count, c.dtype, c.root, o); break;
    case Collective::kReduce: s = comm.Reduce(sp, rp, c.count, c.dtype, c.op, c.root, o); break;
    case Collective::kGather: s = comm.Gather(sp, rp, c.count, c.dtype, c.root, o); break;
    case Collective::kScatter: s = comm.Scatter(sp, rp, c.count, c.dtype, c.root, o); break;
    case Collective::kAlltoall: s = comm.Alltoall(sp, rp, c.count, c.dtype, o); break;
    case Collective::kAlltoallv: s = comm.Alltoallv(sp, counts, displs, rp, counts, displs, c.dtype, o); break;
    case Collective::kBarrier: s = comm.Barrier(o); break;
    default: break;
  }
  if (!s.ok()) return s;
  if (!in_place && send != input) {
    return absl::InternalError(absl::StrCat("rank ", c.rank, ": ", CollectiveName(c.collective), " [", config,
                                            "] wrote into its send buffer"));
  }
  if (c.collective == Collective::kBarrier) return absl::OkStatus();
  std::string err = bench::Verify(c, rp);
  if (!err.empty()) return absl::InternalError(absl::StrCat(err, " [", config, in_place ? ", in place" : "", "]"));
  return absl::OkStatus();
}

struct DtypeOp {
  DataType t;
  ReduceOp op;
};

// All dtypes and all ops, in a rotation so every case runs a different pair.
const std::vector<DtypeOp>& Mix() {
  static const std::vector<DtypeOp> mix = {
      {DataType::kFloat32, ReduceOp::kSum},  {DataType::kInt32, ReduceOp::kMax},   {DataType::kFloat16, ReduceOp::kSum},
      {DataType::kBfloat16, ReduceOp::kMin}, {DataType::kInt8, ReduceOp::kBxor},   {DataType::kUint8, ReduceOp::kBor},
      {DataType::kInt64, ReduceOp::kProd},   {DataType::kFloat64, ReduceOp::kAvg}, {DataType::kInt32, ReduceOp::kBand},
      {DataType::kFloat32, ReduceOp::kProd}, {DataType::kFloat16, ReduceOp::kAvg}, {DataType::kInt64, ReduceOp::kMin},
  };
  return mix;
}

// Every collective x every valid algorithm x counts on `n` ranks over `link`.
void RunMatrix(int n, const std::string& link, const std::vector<size_t>& counts) {
  auto statuses = RunRanks(n, [&](int rank, Communicator& comm) -> absl::Status {
    size_t turn = 0;
    for (Collective coll : AllCollectives()) {
      if (coll == Collective::kSendRecv) continue;
      for (const std::string& algo : comm.ValidAlgorithms(coll)) {
        auto cfg = Configuration::Default(algo);
        if (!cfg.ok()) return cfg.status();
        if (cfg->Has(ParamKind::kLink)) cfg->link = *ParseLink(link);
        if (cfg->Has(ParamKind::kChunk)) cfg->chunk = 4096;  // many pipeline steps even for small counts
        for (size_t count : counts) {
          const DtypeOp m = Mix()[turn++ % Mix().size()];
          DataType t = m.t;
          ReduceOp op = m.op;
          if (!IsReducing(coll)) op = ReduceOp::kSum;
          const int root = static_cast<int>(turn % static_cast<size_t>(n));
          for (bool in_place : {false, true}) {
            CheckCase c{coll, t, op, rank, n, root, count};
            if (absl::Status s = CheckedCall(comm, c, cfg->ToString(), in_place); !s.ok()) {
              return absl::Status(s.code(), absl::StrCat(CollectiveName(coll), " ", cfg->ToString(), " count ", count,
                                                         " ", DataTypeName(t), ": ", s.message()));
            }
          }
        }
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << statuses[static_cast<size_t>(r)];
}

class WorldSizes : public ::testing::TestWithParam<int> {};

TEST_P(WorldSizes, EveryCollectiveEveryAlgorithmOverShm) {
  const int n = GetParam();
  // 0, 1, 7, a prime larger than the world size, a count not divisible by it.
  RunMatrix(n, "auto", {0, 1, 7, 101, static_cast<size_t>(n) * 37 + 1});
}

INSTANTIATE_TEST_SUITE_P(Runtime, WorldSizes, ::testing::Values(1, 2, 3, 4, 5, 7, 8));

TEST(Communicator, EveryCollectiveEveryAlgorithmOverTcp) { RunMatrix(3, "tcp", {0, 7, 1031}); }

TEST(Communicator, LargeAllreduceEveryAlgorithm) {
  // >= 4 MiB, larger than the shm rings (staged in pieces).
  const size_t count = (4u << 20) / 4 + 3;
  auto st = RunRanks(3, [&](int rank, Communicator& comm) -> absl::Status {
    for (const std::string& algo : comm.ValidAlgorithms(Collective::kAllreduce)) {
      CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 3, 0, count};
      if (absl::Status s = CheckedCall(comm, c, algo, false); !s.ok()) return s;
    }
    CheckCase g{Collective::kAllgather, DataType::kInt32, ReduceOp::kSum, rank, 3, 0, count / 3};
    return CheckedCall(comm, g, "ring", false);
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// Two ranks over shm: the ring hands each chunk's result back in place (RingAllreduceReturned; that it does is
// checked in transport_return_test). Every dtype and op of the mix, messages of one frame and around the frame
// limit, 4 KiB chunks and the default's, buffers larger than the 2 MiB rings, out of place and in place, calls
// back to back; every rank's output checked.
TEST(Communicator, TwoRankRingReturnsResultsInPlace) {
  auto st = RunRanks(2, [&](int rank, Communicator& comm) -> absl::Status {
    size_t turn = 0;
    for (const char* config : {"ring(chunk=4096)", "ring"}) {
      for (size_t count :
           {size_t{0}, size_t{1}, size_t{7}, size_t{247}, size_t{249}, size_t{100003}, size_t{(5u << 20) / 4 + 3}}) {
        const DtypeOp m = Mix()[turn++ % Mix().size()];
        for (bool in_place : {false, true}) {
          CheckCase c{Collective::kAllreduce, m.t, m.op, rank, 2, 0, count};
          if (absl::Status s = CheckedCall(comm, c, config, in_place); !s.ok()) {
            return absl::Status(s.code(), absl::StrCat(config, " count ", count, " ", DataTypeName(m.t), " ",
                                                       ReduceOpName(m.op), ": ", s.message()));
          }
        }
      }
    }
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

// Recursive doubling, halving-doubling (allreduce and reducescatter) and the binomial-tree reduce over shm reduce
// each message straight out of the ring (no staging copy; out of place, no copy of the input, which must stay
// unchanged): one round (2 ranks), two (4), three (8, an in-place allreduce ending with a copy), a folded pair first
// (3, 5). Every dtype and op of the mix at counts with empty blocks and messages below and above the one-frame
// limit, then 400 KiB and 5 MiB calls (larger than the test's 2 MiB rings) of the next pair in turn; every root in
// turn, out of place and in place, calls back to back; every rank's output checked.
class DoublingWorlds : public ::testing::TestWithParam<int> {};

TEST_P(DoublingWorlds, ReduceOutOfTheRingOnEveryRank) {
  const int n = GetParam();
  const std::pair<Collective, const char*> cases[] = {{Collective::kAllreduce, "recursive_doubling"},
                                                      {Collective::kAllreduce, "halving_doubling"},
                                                      {Collective::kReducescatter, "halving_doubling"},
                                                      {Collective::kReduce, "binomial_tree"}};
  auto st = RunRanks(n, [&](int rank, Communicator& comm) -> absl::Status {
    size_t turn = 0;
    for (const auto& [coll, config] : cases) {
      std::vector<std::pair<size_t, DtypeOp>> runs;
      for (size_t count : {1, 3, 57, 249, 600}) {
        for (const DtypeOp& m : Mix()) runs.emplace_back(count, m);
      }
      for (size_t bytes : {size_t{400} << 10, size_t{5} << 20}) {
        const DtypeOp m = Mix()[turn++ % Mix().size()];
        runs.emplace_back(bytes / DataTypeSize(m.t) + 3, m);
      }
      for (auto [count, m] : runs) {
        // A reducescatter's count is per block: its whole input stays within the allreduce's sizes.
        if (coll == Collective::kReducescatter && count > 3) count = count / static_cast<size_t>(n) + 1;
        const int root = static_cast<int>(turn++ % static_cast<size_t>(n));
        for (bool in_place : {false, true}) {
          CheckCase c{coll, m.t, m.op, rank, n, root, count};
          if (absl::Status s = CheckedCall(comm, c, config, in_place); !s.ok()) {
            return absl::Status(s.code(), absl::StrCat(CollectiveName(coll), " ", config, " count ", count, " ",
                                                       DataTypeName(m.t), " ", ReduceOpName(m.op), " root ", root,
                                                       in_place ? " in place: " : ": ", s.message()));
          }
        }
      }
    }
    return absl::OkStatus();
  });
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[static_cast<size_t>(r)];
}

INSTANTIATE_TEST_SUITE_P(Communicator, DoublingWorlds, ::testing::Values(2, 3, 4, 5, 8));

TEST(Communicator, TopologyFingerprintOneNode) {
  auto st = RunRanks(3, [&](int, Communicator& comm) -> absl::Status {
    EXPECT_EQ(comm.num_nodes(), 1);
    EXPECT_EQ(comm.local_size(), 3);
    EXPECT_EQ(comm.topology_json(),
              absl::StrCat(R"({"format":2,"inter":[],"intra":["shm"],"nodes":1,"ranks_per_node":[3],"release":")",
                           HCCL_TUNE_RELEASE, R"(","runtime":"hccl-tune"})"));
    EXPECT_EQ(comm.fingerprint().size(), 16u);
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(Communicator, OrdinaryBuffersGoIntoHugePagesAtTheirSecondUse) {
  // HCCL_TUNE_THP: a 2-rank allreduce of 8 MiB - 32 B on buffers faulted in 4 KiB pages. Rank 0 (auto) finds
  // the four whole 2 MiB pages of its send and recv buffers in huge pages after the second call and not after
  // the first; rank 1 (off) never. Every call's output is checked on both ranks.
  if (const std::string why = testing::CannotCollapse(); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::unique_ptr<ThpRegion>> regions;
  for (int i = 0; i < 4; ++i) regions.push_back(std::make_unique<ThpRegion>(4, true));
  for (const auto& r : regions) ASSERT_TRUE(r->ok());
  const size_t count = (regions[0]->bytes() - 32) / sizeof(float);
  auto st = RunRanks(
      2,
      [&](int rank, Communicator& comm) -> absl::Status {
        auto* send = reinterpret_cast<float*>(regions[static_cast<size_t>(2 * rank)]->data() + 16);
        auto* recv = reinterpret_cast<float*>(regions[static_cast<size_t>(2 * rank + 1)]->data() + 16);
        for (int call = 1; call <= 3; ++call) {
          for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>((i % 1000) * (rank + 1) + call);
          if (absl::Status s = comm.Allreduce(send, recv, count, DataType::kFloat32, ReduceOp::kSum); !s.ok()) return s;
          for (size_t i = 0; i < count; ++i) {
            const float want = static_cast<float>((i % 1000) * 3 + 2 * call);
            if (recv[i] != want) return absl::InternalError(absl::StrCat("call ", call, ": recv[", i, "] = ", recv[i]));
          }
          const long want_kb = rank == 0 && call >= 2 ? 4 * 2048 : 0;
          for (const void* p : {static_cast<const void*>(send), static_cast<const void*>(recv)}) {
            if (AnonHugeKb(p) != want_kb) {
              return absl::InternalError(
                  absl::StrCat("after call ", call, ": ", AnonHugeKb(p), " KiB in huge pages, expected ", want_kb));
            }
          }
        }
        return absl::OkStatus();
      },
      [](int rank) {
        Environment e = testing::TestEnv();
        e.thp_bytes = rank == 0 ? Environment::kDefaultThpBytes : kUnbounded;
        return e;
      });
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[static_cast<size_t>(r)];
}

}  // namespace
}  // namespace hccltune

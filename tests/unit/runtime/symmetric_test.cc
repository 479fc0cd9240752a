// Symmetric memory and the `symmetric` allreduce through the real Communicator (ranks as threads, each with
// its own memfd mapped by the others through /proc/self/fd): every rank's output against the independent
// reference of tuner/bench/check, the choice under "auto", and the errors for buffers that do not match.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/sizes.h"
#include "tests/unit/common/thp_region.h"
#include "tests/unit/runtime/rank_fixture.h"
#include "tuner/bench/check.h"

namespace hccltune {
namespace {

using bench::CheckCase;
using testing::RunRanks;

// One checked call of `c` on buffers at byte `send_at` and `recv_at` of a symmetric region (in place: send_at
// is ignored and the input sits where the API expects it inside recv). Mismatches are errors naming the rank.
absl::Status CheckedSymmetricCall(Communicator& comm, char* region, const CheckCase& c, size_t send_at, size_t recv_at,
                                  const std::string& config, bool in_place = false) {
  const size_t es = DataTypeSize(c.dtype);
  const size_t block = c.count * es;
  char* recv = region + recv_at;
  char* send = region + send_at;
  std::memset(recv, 0xcd, std::max(bench::RecvElements(c), c.count) * es);
  if (in_place) {
    switch (c.collective) {
      case Collective::kAllgather: send = recv + static_cast<size_t>(c.rank) * block; break;
      case Collective::kReducescatter: send = recv, recv = send + static_cast<size_t>(c.rank) * block; break;
      default: send = recv; break;
    }
  }
  // Broadcast in place: the root's input is already in recv; non-roots' recv is overwritten.
  if (!(in_place && c.collective == Collective::kBroadcast && c.rank != c.root)) bench::FillInput(c, send);
  CallOptions o;
  o.config = config;
  absl::Status s;
  switch (c.collective) {
    case Collective::kAllreduce: s = comm.Allreduce(send, recv, c.count, c.dtype, c.op, o); break;
    case Collective::kAllgather: s = comm.Allgather(send, recv, c.count, c.dtype, o); break;
    case Collective::kReducescatter: s = comm.Reducescatter(send, recv, c.count, c.dtype, c.op, o); break;
    case Collective::kBroadcast: s = comm.Broadcast(send, recv, c.count, c.dtype, c.root, o); break;
    default: return absl::InternalError("not a symmetric collective");
  }
  if (!s.ok()) return s;
  const std::string bad = bench::Verify(c, recv);
  if (!bad.empty()) return absl::InternalError(absl::StrCat("rank ", c.rank, ": ", bad));
  return absl::OkStatus();
}

// The kernel page size (KiB) of this process's mapping that contains p; -1 if none.
long PageSizeKb(const void* p) { return testing::SmapsKb(p, "KernelPageSize:"); }

// A count of 2 MiB pages in the hugetlb pool from /proc/meminfo: "HugePages_Total:" or "HugePages_Free:".
long HugePages(absl::string_view field) {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (absl::StartsWith(line, field)) return std::stol(line.substr(field.size()));
  }
  return 0;
}

struct Case {
  Collective coll;
  DataType t;
  ReduceOp op;
};

TEST(Symmetric, EveryCollectiveEveryRankMatchesReference) {
  // Fused kernels (fp32 sum/min), the tiled path (bf16, fp16 avg, int32, fp64 max), counts that do not divide
  // into lines or ranks, unaligned starts, different offsets on different ranks, out of place and in place,
  // sizes past the 4 MiB shm ring.
  const Case cases[] = {{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum},
                        {Collective::kAllreduce, DataType::kFloat32, ReduceOp::kMin},
                        {Collective::kAllreduce, DataType::kBfloat16, ReduceOp::kSum},
                        {Collective::kAllreduce, DataType::kFloat16, ReduceOp::kAvg},
                        {Collective::kAllreduce, DataType::kInt32, ReduceOp::kProd},
                        {Collective::kReducescatter, DataType::kFloat32, ReduceOp::kSum},
                        {Collective::kReducescatter, DataType::kFloat64, ReduceOp::kMax},
                        {Collective::kReducescatter, DataType::kBfloat16, ReduceOp::kAvg},
                        {Collective::kAllgather, DataType::kInt8, ReduceOp::kSum},
                        {Collective::kAllgather, DataType::kFloat32, ReduceOp::kSum},
                        {Collective::kBroadcast, DataType::kFloat16, ReduceOp::kSum},
                        {Collective::kBroadcast, DataType::kInt64, ReduceOp::kSum}};
  for (int n : {1, 2, 3, 4}) {
    auto st = RunRanks(n, [&](int rank, Communicator& comm) -> absl::Status {
      const size_t region_bytes = 24u << 20;
      absl::StatusOr<void*> p = comm.AllocSymmetric(region_bytes);
      if (!p.ok()) return p.status();
      char* region = static_cast<char*>(*p);
      int turn = 0;
      for (const Case& k : cases) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1031}, size_t{(1u << 20) + 5}}) {
          const int root = turn++ % n;
          CheckCase c{k.coll, k.t, k.op, rank, n, root, count};
          const size_t extent = std::max(bench::SendElements(c), bench::RecvElements(c)) * DataTypeSize(k.t);
          // Other offsets on other ranks, aligned to the element but not to a line.
          const size_t shift = static_cast<size_t>(rank) * 64 + DataTypeSize(k.t);
          for (bool in_place : {false, true}) {
            if (shift + 2 * extent + 64 > region_bytes) continue;
            absl::Status s = CheckedSymmetricCall(comm, region, c, shift, shift + extent + 64, "symmetric", in_place);
            if (!s.ok()) {
              return absl::Status(s.code(), absl::StrCat(CollectiveName(k.coll), " ", DataTypeName(k.t), " count ",
                                                         count, in_place ? " in place" : "", ": ", s.message()));
            }
            if (n > 1 && comm.last_config() != "symmetric(link=auto)") {
              return absl::InternalError(absl::StrCat("ran ", comm.last_config()));
            }
          }
        }
      }
      return comm.FreeSymmetric(region);
    });
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << n << " ranks, rank " << r << ": " << st[r];
  }
}

TEST(Symmetric, AutoPicksItOnlyForSymmetricBuffers) {
  auto st = RunRanks(2, [&](int rank, Communicator& comm) -> absl::Status {
    absl::StatusOr<void*> p = comm.AllocSymmetric(1u << 20);
    if (!p.ok()) return p.status();
    char* region = static_cast<char*>(*p);
    const size_t big = 64u << 10, small = 64;  // bytes: above and below SymmetricFromBytes
    for (size_t bytes : {big, small}) {
      CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 2, 0, bytes / 4};
      if (absl::Status s = CheckedSymmetricCall(comm, region, c, 0, 512u << 10, "auto"); !s.ok()) return s;
      const bool symmetric = comm.last_config() == "symmetric(link=auto)";
      if (symmetric != (bytes >= SymmetricFromBytes(Collective::kAllreduce, 2))) {
        return absl::InternalError(absl::StrCat(bytes, " bytes on symmetric buffers ran ", comm.last_config()));
      }
    }
    // The same size on ordinary memory never runs it.
    std::vector<float> in(big / 4, 1.0f), out(big / 4);
    if (absl::Status s = comm.Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum);
        !s.ok()) {
      return s;
    }
    if (comm.last_config() == "symmetric(link=auto)" || out[0] != 2.0f) {
      return absl::InternalError(absl::StrCat("heap buffers ran ", comm.last_config(), ", out[0] = ", out[0]));
    }
    // After FreeSymmetric the region is no longer symmetric memory, and freeing it twice is an error.
    if (absl::Status s = comm.FreeSymmetric(region); !s.ok()) return s;
    absl::Status again = comm.FreeSymmetric(region);
    if (again.code() != absl::StatusCode::kInvalidArgument) return absl::InternalError(again.ToString());
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

TEST(Symmetric, MismatchedBuffersFailOnEveryRankAtOnce) {
  auto st = RunRanks(3, [&](int rank, Communicator& comm) -> absl::Status {
    absl::StatusOr<void*> p = comm.AllocSymmetric(1u << 20);
    if (!p.ok()) return p.status();
    char* region = static_cast<char*>(*p);
    std::vector<float> heap(4096, 1.0f);
    CallOptions sym;
    sym.config = "symmetric";
    const auto t0 = std::chrono::steady_clock::now();
    // Rank 1 passes heap memory: every rank's error names rank 1.
    void* buf = rank == 1 ? static_cast<void*>(heap.data()) : static_cast<void*>(region);
    absl::Status s = comm.Allreduce(buf, buf, 4096, DataType::kFloat32, ReduceOp::kSum, sym);
    if (s.code() != absl::StatusCode::kInvalidArgument || !absl::StrContains(s.message(), "rank 1's send buffer")) {
      return absl::InternalError(absl::StrCat("heap: ", s.ToString()));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (secs > 5) return absl::InternalError(absl::StrCat("the errors took ", secs, " s"));
    // Argument errors leave the communicator usable: a matching call still works, on every rank.
    CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 3, 0, 4096};
    if (absl::Status ok = CheckedSymmetricCall(comm, region, c, 0, 65536, "auto"); !ok.ok()) return ok;
    // Rank 2 passes another count: every rank gets an error naming the counts (the communicator's call check,
    // which comes first and breaks the communicator, as for any collective).
    const size_t count = rank == 2 ? 4095 : 4096;
    s = comm.Allreduce(region, region, count, DataType::kFloat32, ReduceOp::kSum, sym);
    if (s.ok() || !absl::StrContains(s.message(), "4095"))
      return absl::InternalError(absl::StrCat("counts: ", s.ToString()));
    return absl::OkStatus();
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[r];
}

TEST(Symmetric, AutoOnSymmetricAndOrdinaryBuffersFailsFast) {
  // Rank 0 passes symmetric memory (auto: `symmetric`), rank 1 heap memory (auto: the ring): both get an error
  // (the ring's first message is not the symmetric header, and the other way round), neither waits for the
  // exec timeout.
  for (Collective coll : {Collective::kAllreduce, Collective::kBroadcast}) {
    auto st = RunRanks(2, [&](int rank, Communicator& comm) -> absl::Status {
      absl::StatusOr<void*> p = comm.AllocSymmetric(1u << 20);
      if (!p.ok()) return p.status();
      std::vector<float> heap(16384, 1.0f);
      float* buf = rank == 0 ? static_cast<float*>(*p) : heap.data();
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status s = coll == Collective::kAllreduce
                           ? comm.Allreduce(buf, buf, 16384, DataType::kFloat32, ReduceOp::kSum)
                           : comm.Broadcast(buf, buf, 16384, DataType::kFloat32, 0);
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s.ok()) return absl::InternalError("mixed buffers were accepted");
      if (secs > 5) return absl::InternalError(absl::StrCat("the error took ", secs, " s: ", s.ToString()));
      return absl::OkStatus();
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << CollectiveName(coll) << " rank " << r << ": " << st[r];
    }
  }
}

TEST(Symmetric, ForcedByHcclTuneAlgoOnOrdinaryBuffersNamesTheVariable) {
  // HCCL_TUNE_ALGO may force `symmetric` (one node: whether a call can run it depends on its buffers). A call on
  // ordinary memory fails on every rank with an argument error that says HCCL_TUNE_ALGO chose it; on symmetric
  // memory it runs, below SymmetricFromBytes too.
  auto st = RunRanks(
      2,
      [&](int rank, Communicator& comm) -> absl::Status {
        std::vector<float> in(256, 1.0f), out(256);
        absl::Status s = comm.Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum);
        if (s.code() != absl::StatusCode::kInvalidArgument ||
            !absl::StrContains(s.message(),
                               "symmetric(link=auto) was chosen by HCCL_TUNE_ALGO for this allreduce "
                               "of 1024 bytes: ") ||
            !absl::StrContains(s.message(), "AllocSymmetric")) {
          return absl::InternalError(absl::StrCat("rank ", rank, ": ", s.ToString()));
        }
        absl::StatusOr<void*> p = comm.AllocSymmetric(1u << 16);
        if (!p.ok()) return p.status();
        CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 2, 0, 16};
        if (absl::Status ok = CheckedSymmetricCall(comm, static_cast<char*>(*p), c, 0, 1024, "auto"); !ok.ok())
          return ok;
        if (comm.last_config() != "symmetric(link=auto)") return absl::InternalError("ran " + comm.last_config());
        return comm.FreeSymmetric(*p);
      },
      [](int) {
        Environment e = testing::TestEnv();
        e.tune_algo = "allreduce:0-=symmetric";
        return e;
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[r];
}

TEST(Symmetric, NonBlockingCallsAndSubCommunicators) {
  // Iallreduce on symmetric buffers runs on the progress thread; an AllocSymmetric issued behind queued work waits
  // for it (program order); a sub-communicator from Split allocates its own symmetric memory.
  auto st = RunRanks(4, [&](int rank, Communicator& comm) -> absl::Status {
    absl::StatusOr<void*> p = comm.AllocSymmetric(1u << 20);
    if (!p.ok()) return p.status();
    auto* v = static_cast<float*>(*p);
    const size_t count = 65536;
    for (size_t i = 0; i < count; ++i) v[i] = static_cast<float>(rank + 1);
    std::shared_ptr<Work> w = comm.Iallreduce(v, v + count, count, DataType::kFloat32, ReduceOp::kSum);
    absl::StatusOr<void*> q = comm.AllocSymmetric(4096);  // queued behind the allreduce
    if (!q.ok()) return q.status();
    if (absl::Status s = w->Wait(); !s.ok()) return s;
    if (comm.last_config() != "symmetric(link=auto)") return absl::InternalError("ran " + comm.last_config());
    for (size_t i = 0; i < count; ++i) {
      if (v[count + i] != 10.0f) return absl::InternalError(absl::StrCat("iallreduce[", i, "] = ", v[count + i]));
    }
    absl::StatusOr<std::unique_ptr<Communicator>> half = comm.Split(rank % 2, rank);
    if (!half.ok()) return half.status();
    absl::StatusOr<void*> h = (*half)->AllocSymmetric(1u << 16);
    if (!h.ok()) return h.status();
    auto* x = static_cast<int32_t*>(*h);
    for (int i = 0; i < 4096; ++i) x[i] = rank;
    if (absl::Status s = (*half)->Allreduce(x, x, 4096, DataType::kInt32, ReduceOp::kSum); !s.ok()) return s;
    const int32_t want = rank % 2 == 0 ? 0 + 2 : 1 + 3;
    if (x[4095] != want || (*half)->last_config() != "symmetric(link=auto)") {
      return absl::InternalError(absl::StrCat("split: ", x[4095], " via ", (*half)->last_config()));
    }
    if (absl::Status s = (*half)->FreeSymmetric(x); !s.ok()) return s;
    if (absl::Status s = comm.FreeSymmetric(*q); !s.ok()) return s;
    return comm.FreeSymmetric(v);
  });
  for (int r = 0; r < 4; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[r];
}

TEST(Symmetric, HugePagesWhenThePoolHasThemOrdinaryPagesOtherwise) {
  // Rank 0 asks for huge pages (HCCL_TUNE_HUGE_PAGES=2M), rank 1 does not: pieces of both kinds in one
  // allocation. With room in the pool rank 0's piece is in 2 MiB pages; a piece larger than what the pool has
  // left falls back to 4 KiB pages. Either way every rank's output is checked.
  const long pool = HugePages("HugePages_Free:");
  const size_t bytes = (9u << 20) + 4096;  // send and recv of a 1 Mi-element fp32 call, at odd offsets
  // More than the whole pool (free or not) holds.
  const size_t beyond = std::max(bytes, static_cast<size_t>(HugePages("HugePages_Total:") + 4) << 21);
  const bool try_beyond = beyond <= (size_t{512} << 20);
  auto st = RunRanks(
      2,
      [&](int rank, Communicator& comm) -> absl::Status {
        for (size_t want : {bytes, try_beyond ? beyond : size_t{0}}) {
          if (want == 0) continue;
          absl::StatusOr<void*> p = comm.AllocSymmetric(want);
          if (!p.ok()) return p.status();
          char* region = static_cast<char*>(*p);
          const long kb = PageSizeKb(region);
          // In huge pages: only rank 0, only when the pool had room (16 free pages; tests/run.sh reserves enough
          // that the tests running beside this one cannot take them all).
          const bool expect_huge = rank == 0 && want == bytes && pool >= 16;
          const bool may_be_huge = rank == 0 && want == bytes;
          if ((expect_huge && kb != 2048) || (!may_be_huge && kb != 4) || (kb != 4 && kb != 2048)) {
            return absl::InternalError(absl::StrCat("rank ", rank, ": ", want, " bytes in ", kb,
                                                    " KiB pages (pool had ", pool, " free huge pages)"));
          }
          CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 2, 0, (1u << 20) + 3};
          const size_t shift = 64 + static_cast<size_t>(rank) * 4;
          if (absl::Status s = CheckedSymmetricCall(comm, region, c, shift, (4u << 20) + 4096, "symmetric"); !s.ok())
            return s;
          c.collective = Collective::kAllgather;
          c.count = (1u << 19) + 1;
          if (absl::Status s = CheckedSymmetricCall(comm, region, c, shift, (4u << 20) + 4096, "symmetric"); !s.ok())
            return s;
          if (absl::Status s = comm.FreeSymmetric(region); !s.ok()) return s;
        }
        return absl::OkStatus();
      },
      [](int rank) {
        Environment e = testing::TestEnv();
        e.huge_pages_bytes = rank == 0 ? (2u << 20) : kUnbounded;
        return e;
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[r];
}

TEST(Symmetric, ARankThatFreedAPeersAllocationFailsTheCallOnEveryRank) {
  // Rank 1 frees allocation a alone; rank 0 then passes buffers in a, ranks 1 and 2 in b. Rank 1 cannot reach
  // rank 0's buffers, so its part of every output is missing: every rank fails, the others naming rank 1.
  auto st = RunRanks(3, [&](int rank, Communicator& comm) -> absl::Status {
    absl::StatusOr<void*> a = comm.AllocSymmetric(1u << 20);
    if (!a.ok()) return a.status();
    absl::StatusOr<void*> b = comm.AllocSymmetric(1u << 20);
    if (!b.ok()) return b.status();
    if (rank == 1) {
      if (absl::Status s = comm.FreeSymmetric(*a); !s.ok()) return s;
    }
    char* region = static_cast<char*>(rank == 0 ? *a : *b);
    CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 3, 0, 4096};
    absl::Status s = CheckedSymmetricCall(comm, region, c, 0, 64u << 10, "symmetric");
    if (s.ok()) return absl::InternalError("the call succeeded with rank 1's part missing");
    const std::string want = rank == 1 ? "which rank 1 has freed" : "rank 1 could not do its part";
    if (!absl::StrContains(s.message(), want)) return s;
    // The communicator still works.
    c.count = 1000;
    return CheckedSymmetricCall(comm, static_cast<char*>(*b), c, 0, 64u << 10, "symmetric");
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[r];
}

TEST(Symmetric, AllocationsMustAgreeInSize) {
  auto st = RunRanks(2, [&](int rank, Communicator& comm) -> absl::Status {
    absl::StatusOr<void*> p = comm.AllocSymmetric(rank == 0 ? 4096 : 8192);
    if (p.ok()) return absl::InternalError("mismatched sizes were accepted");
    if (!absl::StrContains(p.status().message(), "same size")) return p.status();
    // A rank that fails on its own (0 bytes) makes the other fail at once, naming it (not at the timeout).
    const auto t0 = std::chrono::steady_clock::now();
    p = comm.AllocSymmetric(rank == 1 ? 0 : 4096);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (p.ok() || secs > 5) return absl::InternalError(absl::StrCat("0 bytes on rank 1: ", secs, " s"));
    if (rank == 0 && !absl::StrContains(p.status().message(), "rank 1 could not allocate")) return p.status();
    // The next allocation works on both.
    p = comm.AllocSymmetric(4096);
    if (!p.ok()) return p.status();
    return comm.FreeSymmetric(*p);
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace hccltune

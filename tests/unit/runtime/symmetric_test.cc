// Symmetric memory and the `symmetric` allreduce through the real Communicator (ranks as threads, each with
// its own memfd mapped by the others through /proc/self/fd): every rank's output against the independent
// reference of tuner/bench/check, the choice under "auto", and the errors for buffers that do not match.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/unit/runtime/rank_fixture.h"
#include "tuner/bench/check.h"

namespace hccltune {
namespace {

using bench::CheckCase;
using testing::RunRanks;

// One checked allreduce with send at byte `send_at` and recv at `recv_at` of a symmetric allocation (equal
// offsets: in place). Returns mismatches as errors naming the rank.
absl::Status CheckedSymmetricCall(Communicator& comm, char* region, const CheckCase& c, size_t send_at, size_t recv_at,
                                  const std::string& config) {
  const size_t bytes = c.count * DataTypeSize(c.dtype);
  bench::FillInput(c, region + send_at);
  if (recv_at != send_at) std::memset(region + recv_at, 0xcd, bytes);
  CallOptions o;
  o.config = config;
  if (absl::Status s = comm.Allreduce(region + send_at, region + recv_at, c.count, c.dtype, c.op, o); !s.ok()) {
    return s;
  }
  const std::string bad = bench::Verify(c, region + recv_at);
  if (!bad.empty()) return absl::InternalError(absl::StrCat("rank ", c.rank, ": ", bad));
  return absl::OkStatus();
}

struct Case {
  DataType t;
  ReduceOp op;
};

TEST(Symmetric, AllreduceEveryRankMatchesReference) {
  // Fused kernels (fp32 sum/min), the tiled path (bf16, fp16 avg, int32, fp64 max), counts that do not divide
  // into lines or ranks, an unaligned start, out of place and in place, sizes past the 4 MiB shm ring.
  const Case cases[] = {{DataType::kFloat32, ReduceOp::kSum},  {DataType::kFloat32, ReduceOp::kMin},
                        {DataType::kBfloat16, ReduceOp::kSum}, {DataType::kFloat16, ReduceOp::kAvg},
                        {DataType::kInt32, ReduceOp::kProd},   {DataType::kFloat64, ReduceOp::kMax}};
  for (int n : {1, 2, 3, 4}) {
    auto st = RunRanks(n, [&](int rank, Communicator& comm) -> absl::Status {
      const size_t region_bytes = 12u << 20;
      absl::StatusOr<void*> p = comm.AllocSymmetric(region_bytes);
      if (!p.ok()) return p.status();
      char* region = static_cast<char*>(*p);
      for (const Case& k : cases) {
        for (size_t count : {size_t{1}, size_t{7}, size_t{1031}, size_t{(1u << 20) + 5}}) {
          CheckCase c{Collective::kAllreduce, k.t, k.op, rank, n, 0, count};
          const size_t bytes = count * DataTypeSize(k.t);
          for (auto [send_at, recv_at] : {std::pair<size_t, size_t>{0, 6u << 20}, {8, 8}, {4, (6u << 20) + 4}}) {
            if (recv_at + bytes > region_bytes || send_at + bytes > region_bytes) continue;
            absl::Status s = CheckedSymmetricCall(comm, region, c, send_at, recv_at, "symmetric");
            if (!s.ok()) {
              return absl::Status(s.code(), absl::StrCat(DataTypeName(k.t), " count ", count, " send at ", send_at,
                                                         " recv at ", recv_at, ": ", s.message()));
            }
            if (comm.last_config() != "symmetric(link=auto)") {
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
    const size_t big = 64u << 10, small = 64;  // bytes: above and below SymmetricFromBytes(2)
    for (size_t bytes : {big, small}) {
      CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 2, 0, bytes / 4};
      if (absl::Status s = CheckedSymmetricCall(comm, region, c, 0, 512u << 10, "auto"); !s.ok()) return s;
      const bool symmetric = comm.last_config() == "symmetric(link=auto)";
      if (symmetric != (bytes >= SymmetricFromBytes(2))) {
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
    // Rank 2 passes other offsets: every rank gets an InvalidArgument naming offsets.
    const size_t at = rank == 2 ? 8192 : 0;
    absl::Status s = comm.Allreduce(region + at, region + at, 4096, DataType::kFloat32, ReduceOp::kSum, sym);
    if (s.code() != absl::StatusCode::kInvalidArgument || !absl::StrContains(s.message(), "same offsets")) {
      return absl::InternalError(absl::StrCat("offsets: ", s.ToString()));
    }
    // Rank 1 passes heap memory: every rank's error names rank 1.
    void* buf = rank == 1 ? static_cast<void*>(heap.data()) : static_cast<void*>(region);
    s = comm.Allreduce(buf, buf, 4096, DataType::kFloat32, ReduceOp::kSum, sym);
    if (s.code() != absl::StatusCode::kInvalidArgument || !absl::StrContains(s.message(), "rank 1's send buffer")) {
      return absl::InternalError(absl::StrCat("heap: ", s.ToString()));
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (secs > 5) return absl::InternalError(absl::StrCat("the errors took ", secs, " s"));
    // Argument errors leave the communicator usable: a matching call still works, on every rank.
    CheckCase c{Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, rank, 3, 0, 4096};
    return CheckedSymmetricCall(comm, region, c, 0, 65536, "auto");
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << "rank " << r << ": " << st[r];
}

TEST(Symmetric, AllocationsMustAgreeInSize) {
  auto st = RunRanks(2, [&](int rank, Communicator& comm) -> absl::Status {
    absl::StatusOr<void*> p = comm.AllocSymmetric(rank == 0 ? 4096 : 8192);
    if (p.ok()) return absl::InternalError("mismatched sizes were accepted");
    if (!absl::StrContains(p.status().message(), "same size")) return p.status();
    return absl::OkStatus();
  });
  for (const auto& s : st) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace hccltune

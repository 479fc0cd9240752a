// Reduction numerics through the real Communicator (ranks as threads): fp16/bf16 avg of values whose sum
// overflows the dtype, and floating min/max with a NaN or a -0 on one rank, for every reducing algorithm over
// shm and TCP and for the symmetric ones. These reach what the thread harness of tests/unit/algorithms does not:
// the shm endpoint's mailbox exchange (one_shot, direct), its receive-and-reduce ring and the pipelined ring
// allreduce, the TCP endpoint, and the symmetric algorithms' fused (fp32 min/max) and tiled (16-bit avg) paths.
// Every output element is checked against a reference computed in double from the stored inputs (a NaN wants a
// NaN, a zero from min/max its sign), and allreduce outputs are compared bit for bit across ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/common/configuration.h"
#include "runtime/reduce/half.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

using testing::RunRanks;

void Store(DataType t, void* p, double v) {
  switch (t) {
    case DataType::kFloat16: {
      const uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DataType::kBfloat16: {
      const uint16_t h = FloatToBf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DataType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    default: std::memcpy(p, &v, 8); return;
  }
}

double Load(DataType t, const void* p) {
  switch (t) {
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return t == DataType::kFloat16 ? HalfToFloat(h) : Bf16ToFloat(h);
    }
    case DataType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
  }
}

// One kind of input: dtype, op, element i of rank r's send buffer, and the relative tolerance of the result.
struct Kind {
  std::string name;
  DataType t;
  ReduceOp op;
  std::function<double(int r, size_t i)> in;
  double rel_tol;
};

std::vector<Kind> Kinds(int n) {
  const auto ordinary = [](int r, size_t i) {
    return static_cast<double>(static_cast<int>((static_cast<size_t>(r) * 7 + i * 13) % 17) - 8);
  };
  const auto nan_on = [ordinary](int holder) {
    return [ordinary, holder](int r, size_t i) { return r == holder ? std::nan("") : ordinary(r, i); };
  };
  const auto minus_zero_on = [](int holder) { return [holder](int r, size_t) { return r == holder ? -0.0 : 0.0; }; };
  return {
      // 2 x 40000 = 80000 > 65504: the sum overflows fp16, the average does not.
      {"fp16 avg near 40000", DataType::kFloat16, ReduceOp::kAvg,
       [](int r, size_t i) {
         return 40000.0 + 32.0 * static_cast<double>(static_cast<int>((static_cast<size_t>(r) * 3 + i) % 5) - 2);
       },
       1.0 / 256},
      // 2 x 2.5e38 > FLT_MAX: overflows even in fp32.
      {"bf16 avg near 2.5e38", DataType::kBfloat16, ReduceOp::kAvg,
       [](int r, size_t i) { return 2.5e38 * (1.0 + static_cast<double>((static_cast<size_t>(r) + i) % 3) / 64); },
       1.0 / 64},
      {"fp32 min, NaN on the first rank", DataType::kFloat32, ReduceOp::kMin, nan_on(0), 0},
      {"fp32 max, NaN on the last rank", DataType::kFloat32, ReduceOp::kMax, nan_on(n - 1), 0},
      {"bf16 max, NaN on a middle rank", DataType::kBfloat16, ReduceOp::kMax, nan_on(n / 2), 0},
      {"fp64 min, NaN on rank 1", DataType::kFloat64, ReduceOp::kMin, nan_on(1), 0},
      {"fp16 min, -0 on the last rank", DataType::kFloat16, ReduceOp::kMin, minus_zero_on(n - 1), 0},
      {"fp32 max, -0 on the first rank", DataType::kFloat32, ReduceOp::kMax, minus_zero_on(0), 0},
      {"fp32 min, -0 on the first rank", DataType::kFloat32, ReduceOp::kMin, minus_zero_on(0), 0},
  };
}

// The reference for one output element from the n stored inputs: avg in double, min/max as kernels.h defines them.
double Reference(const Kind& k, const std::vector<double>& v) {
  double acc = v[0];
  for (size_t q = 1; q < v.size(); ++q) {
    if (k.op == ReduceOp::kAvg) {
      acc += v[q];
    } else if (std::isnan(acc) || std::isnan(v[q])) {
      acc = std::nan("");
    } else if (acc == 0 && v[q] == 0) {
      const bool negative =
          k.op == ReduceOp::kMin ? std::signbit(acc) || std::signbit(v[q]) : std::signbit(acc) && std::signbit(v[q]);
      acc = negative ? -0.0 : 0.0;
    } else {
      acc = k.op == ReduceOp::kMin ? std::min(acc, v[q]) : std::max(acc, v[q]);
    }
  }
  return k.op == ReduceOp::kAvg ? acc / static_cast<double>(v.size()) : acc;
}

// "" when every element of `out` (count elements; element j reduces input position first + j of every rank) is right.
std::string Verify(const Kind& k, int n, size_t first, const uint8_t* out, size_t count) {
  const size_t es = DataTypeSize(k.t);
  std::vector<uint8_t> cell(8);
  for (size_t j = 0; j < count; ++j) {
    std::vector<double> v;
    for (int q = 0; q < n; ++q) {
      Store(k.t, cell.data(), k.in(q, first + j));
      v.push_back(Load(k.t, cell.data()));
    }
    const double want = Reference(k, v);
    const double got = Load(k.t, out + j * es);
    const bool ok = std::isnan(want) ? std::isnan(got)
                    : want == 0      ? got == 0 && std::signbit(got) == std::signbit(want)
                                     : std::fabs(got - want) <= k.rel_tol * std::fabs(want);
    if (!ok) return absl::StrCat("element ", j, ": got ", got, " want ", want);
  }
  return "";
}

uint64_t Fnv(const uint8_t* p, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// One call of `k` with `config`; `sym` (symmetric memory of enough bytes) holds the buffers when given.
absl::Status OneCall(Communicator& comm, int rank, int n, Collective coll, const Kind& k, size_t count,
                     const std::string& config, bool in_place, char* sym, std::vector<uint64_t>* hashes) {
  const size_t es = DataTypeSize(k.t);
  const size_t un = static_cast<size_t>(n);
  const size_t send_elems = coll == Collective::kReducescatter ? un * count : count;
  std::vector<uint8_t> own_send, own_recv;
  uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
  if (sym != nullptr) {
    send = reinterpret_cast<uint8_t*>(sym) + 64;  // not at a line start
    recv = send + send_elems * es + 64 + es;
  } else {
    own_send.resize(send_elems * es);
    own_recv.resize(count * es);
    send = own_send.data();
    recv = own_recv.data();
  }
  for (size_t i = 0; i < send_elems; ++i) Store(k.t, send + i * es, k.in(rank, i));
  if (in_place) recv = coll == Collective::kReducescatter ? send + static_cast<size_t>(rank) * count * es : send;
  CallOptions o;
  o.config = config;
  const int root = n - 1;
  absl::Status s;
  switch (coll) {
    case Collective::kAllreduce: s = comm.Allreduce(send, recv, count, k.t, k.op, o); break;
    case Collective::kReducescatter: s = comm.Reducescatter(send, recv, count, k.t, k.op, o); break;
    default: s = comm.Reduce(send, recv, count, k.t, k.op, root, o); break;
  }
  if (!s.ok()) return s;
  if (coll == Collective::kReduce && rank != root) return absl::OkStatus();
  const size_t first = coll == Collective::kReducescatter ? static_cast<size_t>(rank) * count : 0;
  const std::string bad = Verify(k, n, first, recv, count);
  if (!bad.empty()) {
    return absl::InternalError(absl::StrCat(CollectiveName(coll), " ", config, " ", k.name, " count ", count,
                                            in_place ? " in place" : "", ", rank ", rank, ": ", bad));
  }
  if (coll == Collective::kAllreduce) hashes->push_back(Fnv(recv, count * es));
  return absl::OkStatus();
}

// Every rank's allreduce outputs hashed in call order: all equal (bit-identical results).
void ExpectSameEverywhere(const std::vector<std::vector<uint64_t>>& hashes) {
  for (size_t r = 1; r < hashes.size(); ++r) EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r << " differs from rank 0";
}

// Every valid allreduce / reduce / reducescatter algorithm on n ranks over shm and TCP. `streaming`: every call's
// output is written with non-temporal stores (HCCL_TUNE_NT_STORES at its minimum), as large calls' are.
void EveryReducingAlgorithm(int n, bool streaming) {
  std::vector<std::vector<uint64_t>> hashes(static_cast<size_t>(n));
  auto st = RunRanks(
      n,
      [&](int rank, Communicator& comm) -> absl::Status {
        for (const char* link : {"auto", "tcp"}) {
          for (Collective coll : {Collective::kAllreduce, Collective::kReduce, Collective::kReducescatter}) {
            for (const std::string& algo : comm.ValidAlgorithms(coll)) {
              auto cfg = Configuration::Default(algo);
              if (!cfg.ok()) return cfg.status();
              if (cfg->Has(ParamKind::kLink)) cfg->link = *ParseLink(link);
              if (cfg->Has(ParamKind::kChunk)) cfg->chunk = 4096;  // several pipeline steps
              for (const Kind& k : Kinds(n)) {
                // 7: every path's scalar tail; 1031: vector bodies, uneven blocks; 20011: many chunks (shm only).
                for (size_t count : {size_t{7}, size_t{1031}, size_t{20011}}) {
                  if (count > 1031 && std::string(link) == "tcp") continue;
                  for (bool in_place : {false, true}) {
                    if (in_place && coll == Collective::kReduce) continue;
                    absl::Status s = OneCall(comm, rank, n, coll, k, count, cfg->ToString(), in_place, nullptr,
                                             &hashes[static_cast<size_t>(rank)]);
                    if (!s.ok()) return s;
                  }
                }
              }
            }
          }
        }
        return absl::OkStatus();
      },
      [streaming](int) {
        Environment e = testing::TestEnv();
        if (streaming) {
          e.nt_stores_bytes = 1;
          e.nt_stores_auto = false;
        }
        return e;
      });
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << n << " ranks" << (streaming ? ", streaming" : "") << ": " << st[r];
  }
  ExpectSameEverywhere(hashes);
}

TEST(Numerics, EveryReducingAlgorithmOverShmAndTcp) {
  for (int n : {2, 3, 4}) EveryReducingAlgorithm(n, false);
}

TEST(Numerics, EveryReducingAlgorithmWithNonTemporalStores) { EveryReducingAlgorithm(3, true); }

TEST(Numerics, SymmetricAllreduceAndReducescatter) {
  for (int n : {2, 3, 4}) {
    std::vector<std::vector<uint64_t>> hashes(static_cast<size_t>(n));
    auto st = RunRanks(n, [&](int rank, Communicator& comm) -> absl::Status {
      const size_t region_bytes = 4u << 20;
      absl::StatusOr<void*> p = comm.AllocSymmetric(region_bytes);
      if (!p.ok()) return p.status();
      for (Collective coll : {Collective::kAllreduce, Collective::kReducescatter}) {
        for (const Kind& k : Kinds(n)) {
          for (size_t count : {size_t{7}, size_t{1031}, size_t{70001}}) {
            for (bool in_place : {false, true}) {
              absl::Status s = OneCall(comm, rank, n, coll, k, count, "symmetric", in_place, static_cast<char*>(*p),
                                       &hashes[static_cast<size_t>(rank)]);
              if (!s.ok()) return s;
              if (comm.last_config() != "symmetric(link=auto)") {
                return absl::InternalError(absl::StrCat("ran ", comm.last_config()));
              }
            }
          }
        }
      }
      return comm.FreeSymmetric(*p);
    });
    for (int r = 0; r < n; ++r) EXPECT_TRUE(st[static_cast<size_t>(r)].ok()) << n << " ranks: " << st[r];
    ExpectSameEverywhere(hashes);
  }
}

}  // namespace
}  // namespace hccltune

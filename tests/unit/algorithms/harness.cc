#include "harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "runtime/algorithms/registry.h"
#include "runtime/reduce/half.h"

namespace hccltune::testing {
namespace {

using Bytes = std::vector<uint8_t>;

bool IsInt(DataType t) { return !IsFloatingPoint(t); }

// Input value of element i on rank r (exactly representable in every dtype), unless the case brings its own.
double InputValue(const Case& c, int r, size_t i) {
  if (c.input) return c.input(r, i);
  if (IsInt(c.dtype)) {
    const int64_t k = static_cast<int64_t>((static_cast<size_t>(r) * 37 + i * 11 + 5) % 251);
    if (c.dtype == DataType::kUint8) return static_cast<double>(k);
    if (c.dtype == DataType::kInt8) return static_cast<double>(k - 125);
    return static_cast<double>((static_cast<int64_t>(r) * 1000003 + static_cast<int64_t>(i) * 7919) % 2000001 -
                               1000000);
  }
  if (c.op == ReduceOp::kProd) {
    static const double kVals[] = {0.75, 1.0, 1.25, -1.0};
    return kVals[(static_cast<size_t>(r) + 2 * i) % 4];
  }
  return static_cast<double>(static_cast<int64_t>((static_cast<size_t>(r) * 7 + i * 13) % 17) - 8) * 0.125;
}

void Store(DataType t, uint8_t* p, double v) {
  switch (t) {
    case DataType::kInt8: {
      int8_t x = static_cast<int8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DataType::kUint8: {
      uint8_t x = static_cast<uint8_t>(v);
      std::memcpy(p, &x, 1);
      break;
    }
    case DataType::kInt32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kInt64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    case DataType::kFloat16: {
      uint16_t x = FloatToHalf(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DataType::kBfloat16: {
      uint16_t x = FloatToBf16(static_cast<float>(v));
      std::memcpy(p, &x, 2);
      break;
    }
    case DataType::kFloat32: {
      float x = static_cast<float>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DataType::kFloat64: std::memcpy(p, &v, 8); break;
  }
}

double Load(DataType t, const uint8_t* p) {
  switch (t) {
    case DataType::kInt8: {
      int8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DataType::kUint8: {
      uint8_t x;
      std::memcpy(&x, p, 1);
      return x;
    }
    case DataType::kInt32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kInt64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      return static_cast<double>(x);
    }
    case DataType::kFloat16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return HalfToFloat(x);
    }
    case DataType::kBfloat16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      return Bf16ToFloat(x);
    }
    case DataType::kFloat32: {
      float x;
      std::memcpy(&x, p, 4);
      return x;
    }
    case DataType::kFloat64: {
      double x;
      std::memcpy(&x, p, 8);
      return x;
    }
  }
  return 0;
}

// Exact integer reference with wrap-around, stored in the dtype.
void StoreIntReduction(const Case& c, const std::vector<double>& vals, uint8_t* out) {
  uint64_t acc = static_cast<uint64_t>(static_cast<int64_t>(vals[0]));
  int64_t mn = static_cast<int64_t>(vals[0]), mx = mn;
  for (size_t k = 1; k < vals.size(); ++k) {
    const int64_t v = static_cast<int64_t>(vals[k]);
    const uint64_t u = static_cast<uint64_t>(v);
    switch (c.op) {
      case ReduceOp::kSum: acc += u; break;
      case ReduceOp::kProd: acc *= u; break;
      case ReduceOp::kBand: acc &= u; break;
      case ReduceOp::kBor: acc |= u; break;
      case ReduceOp::kBxor: acc ^= u; break;
      default: break;
    }
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  if (c.op == ReduceOp::kMin) acc = static_cast<uint64_t>(mn);
  if (c.op == ReduceOp::kMax) acc = static_cast<uint64_t>(mx);
  switch (c.dtype) {
    case DataType::kInt8: {
      int8_t x = static_cast<int8_t>(acc);
      std::memcpy(out, &x, 1);
      break;
    }
    case DataType::kUint8: {
      uint8_t x = static_cast<uint8_t>(acc);
      std::memcpy(out, &x, 1);
      break;
    }
    case DataType::kInt32: {
      int32_t x = static_cast<int32_t>(acc);
      std::memcpy(out, &x, 4);
      break;
    }
    case DataType::kInt64: {
      int64_t x = static_cast<int64_t>(acc);
      std::memcpy(out, &x, 8);
      break;
    }
    default: break;
  }
}

double FloatReduction(const Case& c, const std::vector<double>& vals, double* magnitude) {
  double acc = vals[0];
  *magnitude = std::fabs(vals[0]);
  for (size_t k = 1; k < vals.size(); ++k) {
    *magnitude += std::fabs(vals[k]);
    switch (c.op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += vals[k]; break;
      case ReduceOp::kProd: acc *= vals[k]; break;
      // min / max as kernels.h defines them: a NaN if any value is one; -0 < +0.
      case ReduceOp::kMin:
        acc = std::isnan(acc) || std::isnan(vals[k]) ? std::nan("")
              : acc == 0 && vals[k] == 0             ? (std::signbit(acc) ? acc : vals[k])
              : vals[k] < acc                        ? vals[k]
                                                     : acc;
        break;
      case ReduceOp::kMax:
        acc = std::isnan(acc) || std::isnan(vals[k]) ? std::nan("")
              : acc == 0 && vals[k] == 0             ? (std::signbit(acc) ? vals[k] : acc)
              : vals[k] > acc                        ? vals[k]
                                                     : acc;
        break;
      default: break;
    }
  }
  if (c.op == ReduceOp::kAvg) acc /= static_cast<double>(vals.size());
  return acc;
}

double Epsilon(DataType t) {
  switch (t) {
    case DataType::kFloat16: return 1.0 / 1024;
    case DataType::kBfloat16: return 1.0 / 128;
    case DataType::kFloat32: return 1e-6;
    default: return 1e-14;
  }
}

// Expected output of one region: either exact bytes or a float reference per element.
struct Expect {
  Bytes exact;                 // used when floats is empty
  std::vector<double> floats;  // reduced float reference
  std::vector<double> tol;
};

}  // namespace

std::string Case::Describe() const {
  return absl::StrCat(CollectiveName(collective), " ", config, " n=", world, " count=", count, " ", DataTypeName(dtype),
                      " ", ReduceOpName(op), in_place ? " in-place" : " out-of-place", " root=", root);
}

std::string RunCase(const Case& c) {
  const int n = c.world;
  const size_t un = static_cast<size_t>(n);
  const size_t ds = DataTypeSize(c.dtype);
  const size_t cnt = c.count;
  auto cfg = Configuration::Parse(c.config);
  if (!cfg.ok()) return std::string(cfg.status().message());
  GroupTopology topo = c.topo.node_of.empty() ? SingleNode(n) : c.topo;

  // Per-rank layouts.
  std::vector<size_t> vcounts(un), vdispls(un);  // allgatherv
  size_t vtotal = 0;
  for (size_t i = 0; i < un; ++i) {
    vcounts[i] = cnt == 0 ? 0 : cnt + (i % 3) * (cnt / 2) - (i == 1 ? 1 : 0);
    vdispls[i] = vtotal;
    vtotal += vcounts[i];
  }
  auto a2av = [&](size_t from, size_t to) { return cnt == 0 ? 0 : (from * 3 + to * 5 + cnt) % (cnt + 3); };
  std::vector<std::vector<size_t>> sc(un, std::vector<size_t>(un)), sd = sc, rc = sc, rd = sc;
  for (size_t r = 0; r < un; ++r) {
    size_t so = 0, ro = 0;
    for (size_t j = 0; j < un; ++j) {
      sc[r][j] = a2av(r, j);
      sd[r][j] = so;
      so += sc[r][j];
      rc[r][j] = a2av(j, r);
      rd[r][j] = ro;
      ro += rc[r][j];
    }
  }
  auto send_elems = [&](size_t r) -> size_t {
    switch (c.collective) {
      case Collective::kReducescatter:
      case Collective::kAlltoall: return un * cnt;
      case Collective::kScatter: return un * cnt;
      case Collective::kAllgatherv: return vcounts[r];
      case Collective::kAlltoallv: return sd[r][un - 1] + sc[r][un - 1];
      case Collective::kBarrier: return 0;
      default: return cnt;
    }
  };
  auto recv_elems = [&](size_t r) -> size_t {
    switch (c.collective) {
      case Collective::kAllgather:
      case Collective::kGather:
      case Collective::kAlltoall: return un * cnt;
      case Collective::kAllgatherv: return vtotal;
      case Collective::kAlltoallv: return rd[r][un - 1] + rc[r][un - 1];
      case Collective::kBarrier: return 0;
      default: return cnt;
    }
  };
  // Inputs: element i of rank r's send buffer.
  std::vector<Bytes> input(un);
  for (size_t r = 0; r < un; ++r) {
    input[r].resize(send_elems(r) * ds + 1);
    for (size_t i = 0; i < send_elems(r); ++i) Store(c.dtype, &input[r][i * ds], InputValue(c, static_cast<int>(r), i));
  }
  auto in_bytes = [&](size_t r, size_t elem) { return &input[r][elem * ds]; };

  // Expected outputs (empty = no check on that rank).
  std::vector<Expect> expect(un);
  const size_t root = static_cast<size_t>(c.root);
  auto reduced = [&](size_t block_first, size_t elems) {
    Expect e;
    e.exact.resize(elems * ds);
    for (size_t i = 0; i < elems; ++i) {
      std::vector<double> vals;
      for (size_t r = 0; r < un; ++r) vals.push_back(Load(c.dtype, in_bytes(r, block_first + i)));
      if (IsInt(c.dtype)) {
        StoreIntReduction(c, vals, &e.exact[i * ds]);
      } else {
        double mag = 0;
        e.floats.push_back(FloatReduction(c, vals, &mag));
        e.tol.push_back(Epsilon(c.dtype) * static_cast<double>(n + 1) *
                        std::max({1.0, mag, std::fabs(e.floats.back())}));
      }
    }
    return e;
  };
  for (size_t r = 0; r < un; ++r) {
    Expect& e = expect[r];
    switch (c.collective) {
      case Collective::kAllreduce: e = reduced(0, cnt); break;
      case Collective::kReducescatter: e = reduced(r * cnt, cnt); break;
      case Collective::kReduce:
        if (r == root) e = reduced(0, cnt);
        break;
      case Collective::kBroadcast: e.exact.assign(in_bytes(root, 0), in_bytes(root, cnt)); break;
      case Collective::kAllgather:
      case Collective::kGather:
        if (c.collective == Collective::kGather && r != root) break;
        for (size_t j = 0; j < un; ++j) e.exact.insert(e.exact.end(), in_bytes(j, 0), in_bytes(j, cnt));
        break;
      case Collective::kAllgatherv:
        for (size_t j = 0; j < un; ++j) e.exact.insert(e.exact.end(), in_bytes(j, 0), in_bytes(j, vcounts[j]));
        break;
      case Collective::kScatter: e.exact.assign(in_bytes(root, r * cnt), in_bytes(root, (r + 1) * cnt)); break;
      case Collective::kAlltoall:
        for (size_t j = 0; j < un; ++j) e.exact.insert(e.exact.end(), in_bytes(j, r * cnt), in_bytes(j, (r + 1) * cnt));
        break;
      case Collective::kAlltoallv:
        for (size_t j = 0; j < un; ++j) {
          e.exact.insert(e.exact.end(), in_bytes(j, sd[j][r]), in_bytes(j, sd[j][r] + sc[j][r]));
        }
        break;
      default: break;
    }
  }

  // Buffers. In place: the send region lies inside the receive buffer as algorithm.h describes.
  std::vector<Bytes> recvbuf(un), sendbuf(un);
  std::vector<CollectiveArgs> args(un);
  for (size_t r = 0; r < un; ++r) {
    CollectiveArgs& a = args[r];
    a.collective = c.collective;
    a.count = cnt;
    a.dtype = c.dtype;
    a.op = c.op;
    a.root = c.root;
    a.counts = vcounts;
    a.displs = vdispls;
    a.send_counts = sc[r];
    a.send_displs = sd[r];
    a.recv_counts = rc[r];
    a.recv_displs = rd[r];
    const size_t sbytes = send_elems(r) * ds, rbytes = recv_elems(r) * ds;
    sendbuf[r].assign(input[r].begin(), input[r].begin() + static_cast<std::ptrdiff_t>(sbytes));
    sendbuf[r].push_back(0);
    recvbuf[r].assign(std::max(rbytes, sbytes) + 1, 0x5a);
    a.send = sendbuf[r].data();
    a.recv = recvbuf[r].data();
    if (!c.in_place) continue;
    uint8_t* rb = recvbuf[r].data();
    switch (c.collective) {
      case Collective::kAllgather:
        std::memcpy(rb + r * cnt * ds, input[r].data(), cnt * ds);
        a.send = rb + r * cnt * ds;
        break;
      case Collective::kGather:
        if (r == root) {
          std::memcpy(rb + r * cnt * ds, input[r].data(), cnt * ds);
          a.send = rb + r * cnt * ds;
        }
        break;
      case Collective::kAllgatherv:
        std::memcpy(rb + vdispls[r] * ds, input[r].data(), vcounts[r] * ds);
        a.send = rb + vdispls[r] * ds;
        break;
      case Collective::kReducescatter:
        std::memcpy(rb, input[r].data(), sbytes);
        a.send = rb;
        a.recv = rb + r * cnt * ds;
        break;
      case Collective::kScatter:
        if (r == root) {
          std::memcpy(rb, input[r].data(), sbytes);
          a.send = rb;
          a.recv = rb + r * cnt * ds;
        }
        break;
      case Collective::kBarrier: break;
      default:
        std::memcpy(rb, input[r].data(), sbytes);
        a.send = rb;
        break;
    }
  }
  std::vector<RankResult> res = RunGroup(
      n, topo, [&](int r, AlgorithmContext& ctx) { return registry::Run(args[static_cast<size_t>(r)], *cfg, ctx); });
  for (size_t r = 0; r < un; ++r) {
    if (!res[r].status.ok()) return absl::StrCat("rank ", r, ": ", res[r].status.ToString());
  }
  // Compare.
  for (size_t r = 0; r < un; ++r) {
    const Expect& e = expect[r];
    const uint8_t* out = static_cast<const uint8_t*>(args[r].recv);
    if (!e.floats.empty()) {
      for (size_t i = 0; i < e.floats.size(); ++i) {
        const double got = Load(c.dtype, out + i * ds);
        const double want = e.floats[i];
        // A NaN wants a NaN; a zero from min / max wants its sign (both are exact, no tolerance to hide them).
        const bool exact_kind = std::isnan(want) || (want == 0 && (c.op == ReduceOp::kMin || c.op == ReduceOp::kMax));
        const bool ok = exact_kind
                            ? (std::isnan(want) ? std::isnan(got) : got == 0 && std::signbit(got) == std::signbit(want))
                            : std::fabs(got - want) <= e.tol[i];
        if (!ok) {
          return absl::StrCat("rank ", r, " element ", i, ": got ", got, " want ", want, " +- ", e.tol[i]);
        }
      }
    } else if (!e.exact.empty() && std::memcmp(out, e.exact.data(), e.exact.size()) != 0) {
      for (size_t i = 0; i < e.exact.size(); ++i) {
        if (out[i] != e.exact[i]) {
          return absl::StrCat("rank ", r, " byte ", i, " (element ", i / ds, "): got ", int{out[i]}, " want ",
                              int{e.exact[i]}, " (value got ", Load(c.dtype, out + i / ds * ds), " want ",
                              Load(c.dtype, e.exact.data() + i / ds * ds), ")");
        }
      }
    }
    // Inputs must be left alone out of place.
    if (!c.in_place && std::memcmp(sendbuf[r].data(), input[r].data(), send_elems(r) * ds) != 0) {
      return absl::StrCat("rank ", r, ": send buffer was modified");
    }
    // Nothing written past either buffer (each ends in a guard byte) ...
    if (recvbuf[r].back() != 0x5a || sendbuf[r].back() != 0) {
      return absl::StrCat("rank ", r, ": wrote past the end of its ", recvbuf[r].back() != 0x5a ? "receive" : "send",
                          " buffer");
    }
    // ... nor into a receive buffer that only the root uses.
    const bool rootless_recv = (c.collective == Collective::kReduce || c.collective == Collective::kGather) &&
                               static_cast<int>(r) != c.root && !c.in_place;
    if (rootless_recv && std::any_of(recvbuf[r].begin(), recvbuf[r].end(), [](uint8_t b) { return b != 0x5a; })) {
      return absl::StrCat("rank ", r, ": wrote into its receive buffer, which only the root's ",
                          CollectiveName(c.collective), " uses");
    }
  }
  // Bit-identical results on every rank (allreduce: the whole output).
  if (c.collective == Collective::kAllreduce) {
    for (size_t r = 1; r < un; ++r) {
      if (std::memcmp(args[r].recv, args[0].recv, cnt * ds) != 0) {
        return absl::StrCat("rank ", r, " differs bitwise from rank 0");
      }
    }
  }
  return "";
}

}  // namespace hccltune::testing

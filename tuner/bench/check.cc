#include "tuner/bench/check.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hccltune::bench {
namespace {

// Independent half-precision codecs (exact for the small integers bench uses; general enough for results).
uint16_t FloatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0) return static_cast<uint16_t>(sign);
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) return static_cast<uint16_t>(sign);  // underflow to zero (never for bench inputs)
  // round to nearest even
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}
float HalfBitsToFloat(uint16_t h) {
  const int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}
uint16_t FloatToBf16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}
float Bf16BitsToFloat(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Wraps an integer to the dtype's two's-complement range.
int64_t Wrap(DataType t, int64_t v) {
  switch (t) {
    case DataType::kInt8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case DataType::kUint8: return static_cast<uint8_t>(v);
    case DataType::kInt32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    default: return v;
  }
}

bool IsRooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

// The reduction over all ranks of element `index` of block `block` (element index within the full buffer).
double Reduced(const CheckCase& c, size_t index) {
  const bool fp = IsFloatingPoint(c.dtype);
  if (fp) {
    double acc = InputValue(c, 0, index);
    for (int r = 1; r < c.world; ++r) {
      const double v = InputValue(c, r, index);
      switch (c.op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg: acc += v; break;
        case ReduceOp::kProd: acc *= v; break;
        case ReduceOp::kMin: acc = std::min(acc, v); break;
        case ReduceOp::kMax: acc = std::max(acc, v); break;
        default: break;
      }
    }
    if (c.op == ReduceOp::kAvg) acc /= c.world;
    return acc;
  }
  int64_t acc = static_cast<int64_t>(InputValue(c, 0, index));
  for (int r = 1; r < c.world; ++r) {
    const int64_t v = static_cast<int64_t>(InputValue(c, r, index));
    switch (c.op) {
      case ReduceOp::kSum: acc = Wrap(c.dtype, acc + v); break;
      case ReduceOp::kProd: acc = Wrap(c.dtype, acc * v); break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kBand: acc &= v; break;
      case ReduceOp::kBor: acc |= v; break;
      case ReduceOp::kBxor: acc = Wrap(c.dtype, acc ^ v); break;
      default: break;
    }
  }
  return static_cast<double>(Wrap(c.dtype, acc));
}

}  // namespace

double InputValue(const CheckCase& c, int rank, size_t index) {
  if (c.op == ReduceOp::kProd && IsReducing(c.collective)) return 1.0 + static_cast<double>((rank + index) % 2);
  const int64_t v = static_cast<int64_t>((static_cast<uint64_t>(rank + 1) * 3 + index * 7) % 11);
  return c.dtype == DataType::kUint8 ? static_cast<double>(v) : static_cast<double>(v - 5);
}

void Store(DataType t, void* buf, size_t i, double v) {
  switch (t) {
    case DataType::kInt8: static_cast<int8_t*>(buf)[i] = static_cast<int8_t>(v); break;
    case DataType::kUint8: static_cast<uint8_t*>(buf)[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt32: static_cast<int32_t*>(buf)[i] = static_cast<int32_t>(v); break;
    case DataType::kInt64: static_cast<int64_t*>(buf)[i] = static_cast<int64_t>(v); break;
    case DataType::kFloat16: static_cast<uint16_t*>(buf)[i] = FloatToHalfBits(static_cast<float>(v)); break;
    case DataType::kBfloat16: static_cast<uint16_t*>(buf)[i] = FloatToBf16Bits(static_cast<float>(v)); break;
    case DataType::kFloat32: static_cast<float*>(buf)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: static_cast<double*>(buf)[i] = v; break;
  }
}

double Load(DataType t, const void* buf, size_t i) {
  switch (t) {
    case DataType::kInt8: return static_cast<const int8_t*>(buf)[i];
    case DataType::kUint8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::kInt32: return static_cast<const int32_t*>(buf)[i];
    case DataType::kInt64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::kFloat16: return HalfBitsToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kBfloat16: return Bf16BitsToFloat(static_cast<const uint16_t*>(buf)[i]);
    case DataType::kFloat32: return static_cast<const float*>(buf)[i];
    case DataType::kFloat64: return static_cast<const double*>(buf)[i];
  }
  return 0;
}

size_t SendElements(const CheckCase& c) {
  const size_t n = static_cast<size_t>(c.world);
  switch (c.collective) {
    case Collective::kReducescatter:
    case Collective::kAlltoall:
    case Collective::kAlltoallv: return c.count * n;
    case Collective::kScatter: return c.rank == c.root ? c.count * n : 0;
    case Collective::kBroadcast: return c.rank == c.root ? c.count : 0;
    case Collective::kBarrier: return 0;
    default: return c.count;
  }
}

size_t RecvElements(const CheckCase& c) {
  const size_t n = static_cast<size_t>(c.world);
  switch (c.collective) {
    case Collective::kAllgather:
    case Collective::kAllgatherv:
    case Collective::kAlltoall:
    case Collective::kAlltoallv: return c.count * n;
    case Collective::kGather: return c.rank == c.root ? c.count * n : 0;
    case Collective::kReduce: return c.rank == c.root ? c.count : 0;
    case Collective::kBarrier: return 0;
    default: return c.count;
  }
}

void FillInput(const CheckCase& c, void* send) {
  const size_t n = SendElements(c);
  for (size_t i = 0; i < n; ++i) Store(c.dtype, send, i, InputValue(c, c.rank, i));
}

std::string Verify(const CheckCase& c, const void* recv) {
  const size_t n = RecvElements(c);
  const size_t blk = c.count;
  const double tol = c.dtype == DataType::kFloat16 || c.dtype == DataType::kBfloat16 ? 1e-2
                     : c.dtype == DataType::kFloat32                                 ? 1e-6
                                                                                     : 1e-12;
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    switch (c.collective) {
      case Collective::kAllreduce:
      case Collective::kReduce: want = Reduced(c, i); break;
      case Collective::kReducescatter: want = Reduced(c, static_cast<size_t>(c.rank) * blk + i); break;
      case Collective::kBroadcast: want = InputValue(c, c.root, i); break;
      case Collective::kAllgather:
      case Collective::kAllgatherv:
      case Collective::kGather: want = InputValue(c, static_cast<int>(i / blk), i % blk); break;
      case Collective::kScatter: want = InputValue(c, c.root, static_cast<size_t>(c.rank) * blk + i); break;
      case Collective::kAlltoall:
      case Collective::kAlltoallv:
        // Block j of rank r's output is block r of rank j's input.
        want = InputValue(c, static_cast<int>(i / blk), static_cast<size_t>(c.rank) * blk + i % blk);
        break;
      default: break;
    }
    const double got = Load(c.dtype, recv, i);
    const bool ok =
        IsFloatingPoint(c.dtype) ? std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)) : got == want;
    if (!ok) {
      return absl::StrCat(CollectiveName(c.collective), " ", DataTypeName(c.dtype), " ", ReduceOpName(c.op), " rank ",
                          c.rank, " of ", c.world, ": element ", i, " is ", got, ", expected ", want,
                          IsRooted(c.collective) ? absl::StrCat(" (root ", c.root, ")") : "");
    }
  }
  return "";
}

}  // namespace hccltune::bench

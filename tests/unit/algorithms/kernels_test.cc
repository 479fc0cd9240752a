// Reduction kernels against scalar references; fp16/bf16 conversions exhaustively.
#include "runtime/reduce/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "runtime/common/stream_copy.h"
#include "runtime/reduce/half.h"

namespace hccltune {
namespace {

TEST(HalfTest, Fp16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    uint16_t ref_bits;
    const _Float16 hv = [&] {
      _Float16 v;
      const uint16_t b = static_cast<uint16_t>(h);
      std::memcpy(&v, &b, 2);
      return v;
    }();
    const float reff = static_cast<float>(hv);
    if (std::isnan(reff)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(FloatBits(f), FloatBits(reff)) << h;
    const uint16_t back = FloatToHalf(f);
    std::memcpy(&ref_bits, &hv, 2);
    ASSERT_EQ(back, ref_bits) << h;
  }
}

// float -> fp16 against the compiler's _Float16 conversion (round to nearest even) on a dense sweep of floats.
TEST(HalfTest, Fp16RoundingMatchesCompiler) {
  for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
    const float f = BitsToFloat(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(FloatToHalf(f), bits) << std::hexfloat << f;
  }
  // Exact ties and the overflow boundary.
  for (float f : {65504.0f, 65519.99f, 65520.0f, 5.960464477539063e-08f, 2.9802322387695312e-08f, 2.98023259e-08f,
                  6.103515625e-05f, 1.0009765625f + 0.00048828125f}) {
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    EXPECT_EQ(FloatToHalf(f), bits) << std::hexfloat << f;
    EXPECT_EQ(FloatToHalf(-f), bits | 0x8000u) << f;
  }
}

// bf16 reference: the nearest bf16 by comparing the two neighbours in double, ties to even.
uint16_t Bf16Reference(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t lo = static_cast<uint16_t>(u >> 16);
  const uint16_t hi = static_cast<uint16_t>(lo + 1);
  const double dl = std::fabs(static_cast<double>(Bf16ToFloat(lo)) - f);
  const double dh = std::fabs(static_cast<double>(Bf16ToFloat(hi)) - f);
  if ((u & 0xffffu) == 0) return lo;
  if ((u & 0x7fffffffu) >= 0x7f7f8000u && (u & 0x7fffffffu) < 0x7f800000u) {
    return static_cast<uint16_t>((u & 0x80000000u) >> 16 | 0x7f80u);  // rounds to inf
  }
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(HalfTest, Bf16Rounding) {
  for (uint64_t u = 0; u < (1ull << 32); u += 997) {
    const float f = BitsToFloat(static_cast<uint32_t>(u));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    if (std::isinf(f)) continue;
    ASSERT_EQ(FloatToBf16(f), Bf16Reference(f)) << std::hexfloat << f;
  }
  EXPECT_EQ(FloatToBf16(1.0f + 1.0f / 256), 0x3f80u);  // tie -> even (down)
  EXPECT_EQ(FloatToBf16(1.0f + 3.0f / 256), 0x3f82u);  // tie -> even (up)
}

template <typename T>
void CheckIntOps(DataType dt) {
  std::mt19937_64 rng(42);
  const size_t n = 1031;
  std::vector<T> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(rng());
    b[i] = static_cast<T>(rng());
  }
  a[0] = std::numeric_limits<T>::max();
  b[0] = std::numeric_limits<T>::max();
  using U = std::make_unsigned_t<T>;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kBand, ReduceOp::kBor,
                      ReduceOp::kBxor}) {
    Reduce(dt, op, out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t x = static_cast<uint64_t>(static_cast<U>(a[i])), y = static_cast<uint64_t>(static_cast<U>(b[i]));
      T want{};
      switch (op) {
        case ReduceOp::kSum: want = static_cast<T>(static_cast<U>(x + y)); break;
        case ReduceOp::kProd: want = static_cast<T>(static_cast<U>(x * y)); break;
        case ReduceOp::kMin: want = std::min(a[i], b[i]); break;
        case ReduceOp::kMax: want = std::max(a[i], b[i]); break;
        case ReduceOp::kBand: want = static_cast<T>(x & y); break;
        case ReduceOp::kBor: want = static_cast<T>(x | y); break;
        default: want = static_cast<T>(x ^ y); break;
      }
      ASSERT_EQ(out[i], want) << ReduceOpName(op) << " " << i;
    }
  }
  // Aliasing: inout form.
  std::vector<T> io = a;
  ReduceInto(dt, ReduceOp::kBxor, io.data(), b.data(), n);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(io[i], static_cast<T>(a[i] ^ b[i]));
}

TEST(KernelsTest, Integers) {
  CheckIntOps<int8_t>(DataType::kInt8);
  CheckIntOps<uint8_t>(DataType::kUint8);
  CheckIntOps<int32_t>(DataType::kInt32);
  CheckIntOps<int64_t>(DataType::kInt64);
}

// The floating min / max every kernel must give (kernels.h, Numerics): a NaN when either operand is one, -0 < +0,
// otherwise the smaller / larger value. NaN results are compared as "a NaN" (the payload is unspecified).
template <typename T>
T RefMin(T x, T y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  if (x == 0 && y == 0) return std::signbit(x) || std::signbit(y) ? -T{0} : T{0};
  return x < y ? x : y;
}
template <typename T>
T RefMax(T x, T y) {
  if (std::isnan(x) || std::isnan(y)) return std::numeric_limits<T>::quiet_NaN();
  if (x == 0 && y == 0) return std::signbit(x) && std::signbit(y) ? -T{0} : T{0};
  return x > y ? x : y;
}

template <typename T>
void CheckFloatOps(DataType dt) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100, 100);
  const size_t n = 777;
  std::vector<T> a(n), b(n), out(n);
  for (size_t i = 0; i < n; ++i) {
    a[i] = static_cast<T>(dist(rng));
    b[i] = static_cast<T>(dist(rng));
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
    Reduce(dt, op, out.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      T want = op == ReduceOp::kProd  ? a[i] * b[i]
               : op == ReduceOp::kMin ? RefMin(a[i], b[i])
               : op == ReduceOp::kMax ? RefMax(a[i], b[i])
                                      : a[i] + b[i];
      ASSERT_EQ(out[i], want);
    }
  }
  std::vector<T> avg = a;
  FinalizeAvg(dt, avg.data(), n, 3);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(avg[i], a[i] / static_cast<T>(3));
}

TEST(KernelsTest, Floats) {
  CheckFloatOps<float>(DataType::kFloat32);
  CheckFloatOps<double>(DataType::kFloat64);
}

// The scalar fp32 operation the 16-bit kernels must reproduce (sum, prod, min, max).
float FloatOp(ReduceOp op, float x, float y) {
  return op == ReduceOp::kSum    ? x + y
         : op == ReduceOp::kProd ? x * y
         : op == ReduceOp::kMin  ? RefMin(x, y)
                                 : RefMax(x, y);
}

// 16-bit floats: widen, compute in fp32, round once.
TEST(KernelsTest, HalfAndBfloat) {
  std::mt19937 rng(9);
  const size_t n = 1000;  // spans several internal tiles and an F16C tail
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
    const bool half = dt == DataType::kFloat16;
    auto to = [&](uint16_t h) { return half ? HalfToFloat(h) : Bf16ToFloat(h); };
    auto from = [&](float f) { return half ? FloatToHalf(f) : FloatToBf16(f); };
    std::vector<uint16_t> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = static_cast<uint16_t>(rng());
      b[i] = static_cast<uint16_t>(rng());
    }
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      Reduce(dt, op, out.data(), a.data(), b.data(), n);
      for (size_t i = 0; i < n; ++i) {
        const float x = to(a[i]), y = to(b[i]);
        const float r = FloatOp(op, x, y);
        const uint16_t want = from(r);
        if (std::isnan(r)) {
          ASSERT_TRUE(std::isnan(to(out[i])));
        } else {
          ASSERT_EQ(out[i], want) << DataTypeName(dt) << " " << ReduceOpName(op) << " " << x << " " << y;
        }
      }
    }
    std::vector<uint16_t> avg = a;
    FinalizeAvg(dt, avg.data(), n, 7);
    for (size_t i = 0; i < n; ++i) {
      const float want = to(a[i]) / 7.0f;
      if (std::isnan(want)) continue;
      ASSERT_EQ(avg[i], from(want));
    }
  }
}

// 16-bit floats at their edges, every pair of special values (signed zeros, smallest and largest subnormals and
// normals, infinities, NaNs, values whose sum or product lands on a rounding tie) laid out so that the vector
// loops (8, 16 and 32 lanes) and the scalar tails all see them: bit-identical to widening, one fp32 operation and
// the scalar rounding (NaN results: a NaN).
TEST(KernelsTest, HalfAndBfloatEdgeValues) {
  const std::vector<uint16_t> fp16 = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x3c00, 0xbc00,
                                      0x3c01, 0x3555, 0x1000, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0xfd01};
  const std::vector<uint16_t> bf16 = {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0080, 0x8080, 0x3f80, 0xbf80,
                                      0x3f81, 0x3eab, 0x3b80, 0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xff81};
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
    const bool half = dt == DataType::kFloat16;
    const std::vector<uint16_t>& v = half ? fp16 : bf16;
    auto to = [&](uint16_t h) { return half ? HalfToFloat(h) : Bf16ToFloat(h); };
    auto from = [&](float f) { return half ? FloatToHalf(f) : FloatToBf16(f); };
    std::vector<uint16_t> a, b;
    for (uint16_t x : v) {
      for (uint16_t y : v) a.push_back(x), b.push_back(y);
    }
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      for (size_t n : {a.size(), a.size() - 7, size_t{15}, size_t{17}, size_t{49}}) {
        std::vector<uint16_t> out(n, 0x1234);
        Reduce(dt, op, out.data(), a.data(), b.data(), n);
        for (size_t i = 0; i < n; ++i) {
          const float x = to(a[i]), y = to(b[i]);
          const float r = FloatOp(op, x, y);
          if (std::isnan(r)) {  // which operand's payload survives is the hardware's choice, as in HalfAndBfloat
            ASSERT_TRUE(std::isnan(to(out[i]))) << DataTypeName(dt) << " " << std::hex << a[i] << " " << b[i];
            continue;
          }
          ASSERT_EQ(out[i], from(r)) << DataTypeName(dt) << " " << ReduceOpName(op) << " " << std::hex << a[i] << " "
                                     << b[i] << " n=" << std::dec << n;
        }
      }
    }
  }
}

// Non-temporal variants: byte-identical to memcpy / Reduce for every dtype and op, at every output alignment
// within a line, across tile boundaries, and in place (out aliasing a).
TEST(KernelsTest, StreamingMatchesPlain) {
  std::mt19937 rng(11);
  const size_t max_bytes = 3 * 8192 + 200;  // several 8 KiB tiles plus an unaligned tail
  std::vector<uint8_t> a(max_bytes + 64), b(max_bytes + 64);
  for (auto& x : a) x = static_cast<uint8_t>(rng());
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  for (size_t shift : {size_t{0}, size_t{4}, size_t{8}, size_t{16}, size_t{40}}) {
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{64}, size_t{200}, size_t{8192}, max_bytes}) {
      std::vector<uint8_t> got(max_bytes + 128, 0xAB), want(max_bytes + 128, 0xAB);
      CopyStreaming(got.data() + shift, a.data() + 3, bytes);
      std::memcpy(want.data() + shift, a.data() + 3, bytes);
      ASSERT_EQ(got, want) << "copy shift " << shift << " bytes " << bytes;
    }
    for (DataType dt : {DataType::kInt8, DataType::kUint8, DataType::kInt32, DataType::kInt64, DataType::kFloat16,
                        DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
      const size_t es = DataTypeSize(dt);
      if (shift % es != 0) continue;
      const size_t count = max_bytes / es;
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kBxor}) {
        if (!CheckReduceSupported(op, dt).ok()) continue;
        std::vector<uint8_t> got(max_bytes + 128, 0xCD), want(max_bytes + 128, 0xCD);
        ReduceStreaming(dt, op, got.data() + shift, a.data(), b.data(), count);
        Reduce(dt, op, want.data() + shift, a.data(), b.data(), count);
        ASSERT_EQ(got, want) << DataTypeName(dt) << " " << ReduceOpName(op) << " shift " << shift;
        // In place: out == a.
        std::vector<uint8_t> io(max_bytes + 128), io_want(max_bytes + 128);
        std::memcpy(io.data() + shift, a.data(), count * es);
        std::memcpy(io_want.data() + shift, a.data(), count * es);
        ReduceStreaming(dt, op, io.data() + shift, io.data() + shift, b.data(), count);
        Reduce(dt, op, io_want.data() + shift, io_want.data() + shift, b.data(), count);
        ASSERT_EQ(io, io_want) << DataTypeName(dt) << " " << ReduceOpName(op) << " in place, shift " << shift;
      }
    }
  }
}

TEST(KernelsTest, StreamRegionContains) {
  char buf[100];
  const StreamRegion r{buf + 10, 50};
  EXPECT_TRUE(r.Contains(buf + 10, 50));
  EXPECT_TRUE(r.Contains(buf + 30, 10));
  EXPECT_FALSE(r.Contains(buf + 9, 2));
  EXPECT_FALSE(r.Contains(buf + 50, 11));
  EXPECT_FALSE(StreamRegion{}.Contains(buf, 1));
  EXPECT_FALSE((StreamRegion{nullptr, 100}.Contains(buf, 1)));
}

// ReduceFanout is bit-identical to chained Reduce() calls (the tiled fallback of the symmetric allreduce) —
// except which NaN's payload survives when two NaNs meet in a sum or product (the compiler may swap the
// operands of Reduce's commutative loops) — for every fused op, 2-5 inputs, 1-4 outputs, unaligned starts (the scalar
// head), vector bodies and tails, with NaNs, infinities, signed zeros and ties in min/max; and refuses what it has no
// kernel for.
TEST(KernelsTest, FanoutMatchesChainedReduce) {
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1e-40f,
                            3.0f,
                            3.0f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-4, 4);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
    for (int n = 2; n <= 5; ++n) {
      for (int m = 1; m <= 4; ++m) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1000}}) {
          for (size_t shift : {size_t{0}, size_t{1}, size_t{15}}) {  // elements past a 64-byte line
            for (bool streaming : {false, true}) {
              std::vector<std::vector<float>> in(static_cast<size_t>(n), std::vector<float>(count + shift + 16));
              for (auto& v : in) {
                for (float& x : v) x = rng() % 4 == 0 ? specials[rng() % std::size(specials)] : dist(rng);
              }
              std::vector<float> ref(count + 16);
              if (count > 0) {
                Reduce(DataType::kFloat32, op, ref.data(), in[0].data() + shift, in[1].data() + shift, count);
                for (int k = 2; k < n; ++k) {
                  Reduce(DataType::kFloat32, op, ref.data(), ref.data(), in[static_cast<size_t>(k)].data() + shift,
                         count);
                }
              }
              // Outputs at the same offset within a 64-byte line, as symmetric buffers are.
              std::vector<std::vector<float>> outs(static_cast<size_t>(m), std::vector<float>(count + shift + 32));
              std::vector<const void*> ip;
              std::vector<void*> op_ptrs;
              for (auto& v : in) ip.push_back(v.data() + shift);
              for (auto& v : outs) {
                auto* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(v.data()) + 63) / 64 * 64);
                op_ptrs.push_back(base + shift);
              }
              ASSERT_TRUE(ReduceFanout(DataType::kFloat32, op, ip.data(), n, op_ptrs.data(), m, count, streaming));
              for (int k = 0; k < m; ++k) {
                const auto* got = static_cast<const float*>(op_ptrs[static_cast<size_t>(k)]);
                size_t bad = count;
                for (size_t i = 0; i < count && bad == count; ++i) {
                  // min / max: bit for bit even there (commutative, minmax.h).
                  const bool both_nan =
                      std::isnan(got[i]) && std::isnan(ref[i]) && (op == ReduceOp::kSum || op == ReduceOp::kProd);
                  if (!both_nan && std::memcmp(&got[i], &ref[i], sizeof(float)) != 0) bad = i;
                }
                EXPECT_EQ(bad, count) << "op " << static_cast<int>(op) << " n " << n << " m " << m << " count " << count
                                      << " shift " << shift << " streaming " << streaming << " output " << k;
              }
            }
          }
        }
      }
    }
  }
  float a[4] = {}, b[4] = {}, o[4] = {};
  const void* ins[2] = {a, b};
  void* outs[1] = {o};
  EXPECT_FALSE(ReduceFanout(DataType::kFloat32, ReduceOp::kAvg, ins, 2, outs, 1, 4, false));
  EXPECT_FALSE(ReduceFanout(DataType::kBfloat16, ReduceOp::kSum, ins, 2, outs, 1, 4, false));
  EXPECT_FALSE(ReduceFanout(DataType::kInt32, ReduceOp::kSum, ins, 2, outs, 1, 4, false));
}

// SumFewN (a small allreduce's one-pass sum of n inputs) against chained Reduce calls, bit for bit: fp32 and fp64,
// 2-8 inputs, 1-16 elements, specials included, with the output aliasing the first or the last input; larger
// counts and other dtypes are refused untouched.
template <typename T>
void CheckSumFewN() {
  const DataType dtype = sizeof(T) == 4 ? DataType::kFloat32 : DataType::kFloat64;
  const T specials[] = {T(0),
                        -T(0),
                        std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::quiet_NaN(),
                        std::numeric_limits<T>::denorm_min(),
                        T(1e30),
                        T(-1e30)};
  std::mt19937 rng(11);
  std::uniform_real_distribution<T> dist(-1e3, 1e3);
  for (int n = 2; n <= 8; ++n) {
    for (size_t count = 1; count <= kSumFewMax; ++count) {
      for (int alias : {-1, 0, n - 1}) {  // output apart, in place of the first input, of the last
        std::vector<std::vector<T>> in(static_cast<size_t>(n), std::vector<T>(count));
        for (auto& v : in) {
          for (T& x : v) x = rng() % 5 == 0 ? specials[rng() % std::size(specials)] : dist(rng);
        }
        std::vector<T> ref(count);
        Reduce(dtype, ReduceOp::kSum, ref.data(), in[0].data(), in[1].data(), count);
        for (int k = 2; k < n; ++k) {
          Reduce(dtype, ReduceOp::kSum, ref.data(), ref.data(), in[static_cast<size_t>(k)].data(), count);
        }
        std::vector<T> apart(count, T(7));
        T* out = alias < 0 ? apart.data() : in[static_cast<size_t>(alias)].data();
        std::vector<const void*> ip;
        for (auto& v : in) ip.push_back(v.data());
        ASSERT_TRUE(SumFewN(dtype, out, ip.data(), n, count));
        for (size_t i = 0; i < count; ++i) {
          if (std::isnan(ref[i])) {
            EXPECT_TRUE(std::isnan(out[i])) << "n " << n << " count " << count << " alias " << alias << " i " << i;
          } else {
            EXPECT_EQ(std::memcmp(&out[i], &ref[i], sizeof(T)), 0)
                << "n " << n << " count " << count << " alias " << alias << " i " << i << ": " << out[i] << " vs "
                << ref[i];
          }
        }
      }
    }
  }
}

TEST(KernelsTest, SumFewNMatchesChainedReduce) {
  CheckSumFewN<float>();
  CheckSumFewN<double>();
  float a[kSumFewMax + 1] = {1}, b[kSumFewMax + 1] = {2}, o[kSumFewMax + 1] = {5};
  const void* ins[2] = {a, b};
  EXPECT_FALSE(SumFewN(DataType::kFloat32, o, ins, 2, kSumFewMax + 1));
  EXPECT_FALSE(SumFewN(DataType::kInt32, o, ins, 2, 4));
  EXPECT_FALSE(SumFewN(DataType::kFloat16, o, ins, 2, 4));
  EXPECT_EQ(o[0], 5.0f);  // refused: untouched
}

// min / max of floating types do not depend on operand order (kernels.h, Numerics): a NaN in either operand gives a
// NaN, +0 and -0 give -0 for min and +0 for max, and Reduce(a, b) equals Reduce(b, a) bit for bit — for every
// floating dtype, at every position of the vector bodies (8, 16, 32 lanes), their tails and the 16-bit tiles.
TEST(KernelsTest, MinMaxPropagateNaNAndOrderSignedZeros) {
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
    const size_t es = DataTypeSize(dt);
    auto store = [&](std::vector<uint8_t>& v, size_t i, double x) {
      uint8_t* p = &v[i * es];
      if (dt == DataType::kFloat16 || dt == DataType::kBfloat16) {
        const uint16_t h =
            dt == DataType::kFloat16 ? FloatToHalf(static_cast<float>(x)) : FloatToBf16(static_cast<float>(x));
        std::memcpy(p, &h, 2);
      } else if (dt == DataType::kFloat32) {
        const float f = static_cast<float>(x);
        std::memcpy(p, &f, 4);
      } else {
        std::memcpy(p, &x, 8);
      }
    };
    auto load = [&](const std::vector<uint8_t>& v, size_t i) -> double {
      const uint8_t* p = &v[i * es];
      if (dt == DataType::kFloat16 || dt == DataType::kBfloat16) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return dt == DataType::kFloat16 ? HalfToFloat(h) : Bf16ToFloat(h);
      }
      if (dt == DataType::kFloat32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
      }
      double d;
      std::memcpy(&d, p, 8);
      return d;
    };
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    // (a, b) pairs, each placed at every position of a buffer, the rest of which holds ordinary values.
    const std::pair<double, double> pairs[] = {{nan, 1.0},  {1.0, nan},  {nan, -inf}, {inf, nan},  {nan, 0.0},
                                               {-0.0, nan}, {nan, nan},  {0.0, -0.0}, {-0.0, 0.0}, {-0.0, -0.0},
                                               {0.0, 0.0},  {-nan, 2.0}, {2.0, -nan}};
    for (size_t count : {size_t{1}, size_t{7}, size_t{33}, size_t{70}, size_t{300}}) {
      for (const auto& [x, y] : pairs) {
        for (size_t at = 0; at < count; at += (count > 70 ? 37 : 1)) {
          std::vector<uint8_t> a(count * es), b(count * es), ab(count * es), ba(count * es);
          for (size_t i = 0; i < count; ++i) {
            store(a, i, static_cast<double>(i % 5) - 2.0);
            store(b, i, 1.5 - static_cast<double>(i % 3));
          }
          store(a, at, x);
          store(b, at, y);
          for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
            Reduce(dt, op, ab.data(), a.data(), b.data(), count);
            Reduce(dt, op, ba.data(), b.data(), a.data(), count);
            ASSERT_EQ(ab, ba) << DataTypeName(dt) << " " << ReduceOpName(op) << " " << x << " " << y << " at " << at
                              << " of " << count << ": depends on the operand order";
            const double got = load(ab, at);
            const double want =
                op == ReduceOp::kMin ? RefMin(load(a, at), load(b, at)) : RefMax(load(a, at), load(b, at));
            if (std::isnan(want)) {
              ASSERT_TRUE(std::isnan(got)) << DataTypeName(dt) << " " << ReduceOpName(op) << " " << x << " " << y
                                           << " at " << at << " of " << count << ": got " << got;
            } else {
              ASSERT_EQ(got, want) << DataTypeName(dt) << " " << ReduceOpName(op) << " " << x << " " << y;
              ASSERT_EQ(std::signbit(got), std::signbit(want))
                  << DataTypeName(dt) << " " << ReduceOpName(op) << " " << x << " " << y << " at " << at;
            }
          }
        }
      }
    }
  }
}

// The fused many-input kernel: a NaN in any one input gives a NaN whichever input holds it, and the outputs do
// not change when the inputs are permuted (here: reversed), signed zeros included.
TEST(KernelsTest, FanoutMinMaxDoNotDependOnInputOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    for (int n = 2; n <= 5; ++n) {
      for (size_t count : {size_t{5}, size_t{16}, size_t{40}}) {
        for (int holder = 0; holder < n; ++holder) {
          std::vector<std::vector<float>> in(static_cast<size_t>(n), std::vector<float>(count));
          for (size_t k = 0; k < in.size(); ++k) {
            for (size_t i = 0; i < count; ++i) {
              in[k][i] = (i + k) % 3 == 0 ? ((i + k) % 2 == 0 ? 0.0f : -0.0f) : static_cast<float>(i % 7) - 3.0f;
            }
          }
          for (size_t i = 0; i < count; i += 3) in[static_cast<size_t>(holder)][i] = nan;
          std::vector<float> fwd(count), rev(count);
          std::vector<const void*> ip, rp;
          for (size_t k = 0; k < in.size(); ++k) {
            ip.push_back(in[k].data());
            rp.push_back(in[in.size() - 1 - k].data());
          }
          void* of[1] = {fwd.data()};
          void* orv[1] = {rev.data()};
          ASSERT_TRUE(ReduceFanout(DataType::kFloat32, op, ip.data(), n, of, 1, count, false));
          ASSERT_TRUE(ReduceFanout(DataType::kFloat32, op, rp.data(), n, orv, 1, count, false));
          ASSERT_EQ(0, std::memcmp(fwd.data(), rev.data(), count * sizeof(float)))
              << ReduceOpName(op) << " n " << n << " count " << count << " NaN on input " << holder;
          for (size_t i = 0; i < count; i += 3) {
            ASSERT_TRUE(std::isnan(fwd[i]))
                << ReduceOpName(op) << " n " << n << " element " << i << " NaN on input " << holder;
          }
        }
      }
    }
  }
}

// fp16 / bf16 avg (kernels.h, "avg"): ScaleForAvg is x (1/n) in fp32 rounded once, for every 16-bit value, in
// place too; AverageN sums the scaled inputs in fp32 left to right and rounds once.
TEST(KernelsTest, ScaleForAvgAndAverageNMatchTheScalarDefinition) {
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
    const bool half = dt == DataType::kFloat16;
    auto to = [&](uint16_t h) { return half ? HalfToFloat(h) : Bf16ToFloat(h); };
    auto from = [&](float f) { return half ? FloatToHalf(f) : FloatToBf16(f); };
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    for (int n : {1, 2, 3, 4, 7}) {
      std::vector<uint16_t> out(all.size()), io = all;
      ScaleForAvg(dt, out.data(), all.data(), all.size(), n);
      ScaleForAvg(dt, io.data(), io.data(), io.size(), n);
      ASSERT_EQ(out, io) << DataTypeName(dt) << " in place";
      const float inv = 1.0f / static_cast<float>(n);
      for (size_t i = 0; i < all.size(); ++i) {
        const float x = to(all[i]);
        if (std::isnan(x)) {
          ASSERT_TRUE(std::isnan(to(out[i])));
          continue;
        }
        ASSERT_EQ(out[i], n == 1 ? all[i] : from(x * inv)) << DataTypeName(dt) << " n " << n << " " << std::hex << i;
      }
    }
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-1000, 1000);
    for (int n : {1, 2, 3, 4, 5}) {
      const size_t first = 3, count = 1000;  // several tiles and a ragged end
      std::vector<std::vector<uint16_t>> in(static_cast<size_t>(n), std::vector<uint16_t>(first + count));
      std::vector<const void*> ptrs;
      for (auto& v : in) {
        for (uint16_t& x : v) x = from(dist(rng));
        ptrs.push_back(v.data());
      }
      std::vector<uint16_t> out(count);
      AverageN(dt, ptrs.data(), n, first, out.data(), count);
      const float inv = 1.0f / static_cast<float>(n);
      for (size_t i = 0; i < count; ++i) {
        float acc = to(in[0][first + i]) * inv;
        for (size_t k = 1; k < in.size(); ++k) {
          const float term = to(in[k][first + i]) * inv;  // two roundings, as the kernel (no FMA)
          acc = acc + term;
        }
        ASSERT_EQ(out[i], from(acc)) << DataTypeName(dt) << " n " << n << " element " << i;
      }
    }
  }
}

// The overflow avg had: 2 or 4 ranks holding fp16 values near 40000 (or bf16 near 2.5e38) — their sum overflows
// the dtype (bf16: even fp32) while the average fits. Summing then dividing (Reduce, FinalizeAvg) gives inf; both
// forms of the avg the algorithms now use give the average: AverageN (one rank reduces every input) and
// ScaleForAvg on entry followed by the per-step Reduce of partials (ring, trees), in any combining order.
TEST(KernelsTest, HalfAndBfloatAvgOfLargeValuesDoesNotOverflow) {
  for (DataType dt : {DataType::kFloat16, DataType::kBfloat16}) {
    const bool half = dt == DataType::kFloat16;
    auto to = [&](uint16_t h) { return half ? HalfToFloat(h) : Bf16ToFloat(h); };
    auto from = [&](float f) { return half ? FloatToHalf(f) : FloatToBf16(f); };
    const float big = half ? 40000.0f : 2.5e38f;
    const float step = half ? 32.0f : 2.5e38f / 64;
    for (int n : {2, 4}) {
      const size_t count = 77;  // vector bodies and tails
      std::vector<std::vector<uint16_t>> in(static_cast<size_t>(n), std::vector<uint16_t>(count));
      std::vector<const void*> ptrs;
      for (size_t k = 0; k < in.size(); ++k) {
        for (size_t i = 0; i < count; ++i) in[k][i] = from(big + step * static_cast<float>((k + i) % 3));
        ptrs.push_back(in[k].data());
      }
      auto check = [&](const std::vector<uint16_t>& out, const char* how) {
        for (size_t i = 0; i < count; ++i) {
          double want = 0;
          for (const auto& v : in) want += static_cast<double>(to(v[i])) / n;
          const double got = to(out[i]);
          ASSERT_TRUE(std::isfinite(got)) << DataTypeName(dt) << " n " << n << " " << how << " element " << i;
          ASSERT_LE(std::fabs(got - want), want / (half ? 512 : 64)) << DataTypeName(dt) << " " << how;
        }
      };
      // The old way: the sum of partials overflows.
      std::vector<uint16_t> summed = in[0];
      for (size_t k = 1; k < in.size(); ++k)
        Reduce(dt, ReduceOp::kSum, summed.data(), summed.data(), in[k].data(), count);
      FinalizeAvg(dt, summed.data(), count, n);
      EXPECT_TRUE(std::isinf(to(summed[0]))) << DataTypeName(dt) << ": the inputs no longer overflow a sum";
      std::vector<uint16_t> out(count);
      AverageN(dt, ptrs.data(), n, 0, out.data(), count);
      check(out, "AverageN");
      // Scaled on entry, then partials combined as avg combines them (a sum), forwards and backwards.
      std::vector<std::vector<uint16_t>> scaled = in;
      for (auto& v : scaled) ScaleForAvg(dt, v.data(), v.data(), count, n);
      std::vector<uint16_t> fwd = scaled[0], bwd = scaled.back();
      for (size_t k = 1; k < scaled.size(); ++k) {
        Reduce(dt, ReduceOp::kAvg, fwd.data(), fwd.data(), scaled[k].data(), count);
        Reduce(dt, ReduceOp::kAvg, bwd.data(), scaled[scaled.size() - 1 - k].data(), bwd.data(), count);
      }
      check(fwd, "scaled, rank order");
      check(bwd, "scaled, reverse order");
    }
  }
}

}  // namespace
}  // namespace hccltune

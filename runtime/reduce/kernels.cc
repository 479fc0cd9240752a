#include "runtime/reduce/kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/common/stream_copy.h"
#include "runtime/reduce/half.h"
#include "runtime/reduce/minmax.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The loops below are written to be auto-vectorised; -O3 is set for this file in CMake. Reduce() is compiled
// twice — for the x86-64 baseline (SSE2) and for AVX2 — and the AVX2 copy is chosen once at run time when the
// CPU has it (the bodies are force-inlined into each copy, so each is vectorised for its own ISA). Results are
// bit-identical between the two: only lane width changes, every element is still one IEEE operation.
#define HT_INLINE inline __attribute__((always_inline))

namespace hccltune {
namespace {

struct Sum {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};
struct Prod {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      // Widen to at least unsigned int so the multiplication itself never overflows a signed type.
      using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
      return static_cast<T>(static_cast<U>(static_cast<U>(static_cast<std::make_unsigned_t<T>>(a)) *
                                           static_cast<U>(static_cast<std::make_unsigned_t<T>>(b))));
    } else {
      return a * b;
    }
  }
};
// Floating types: NaN-propagating and commutative bit for bit (minmax.h); integers: the plain comparison.
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return reduce_internal::FloatMin(a, b);
    } else {
      return a < b ? a : b;
    }
  }
};
struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return reduce_internal::FloatMax(a, b);
    } else {
      return a > b ? a : b;
    }
  }
};
struct Band {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct Bor {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct Bxor {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};

// fp16 / bf16 avg's scaling of one input (ScaleForAvg), run through the 16-bit paths below as a binary op that
// ignores its second operand: a x (1/n) in fp32, one IEEE multiply.
struct Scale {
  float inv;
  float operator()(float a, float) const { return a * inv; }
};

template <typename T, typename F>
HT_INLINE void Apply(void* out, const void* a, const void* b, size_t count, F f) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = f(x[i], y[i]);
}

// ---- 16-bit floats: widen a tile to fp32, combine, round back. ----
constexpr size_t kTile = 256;

using ToFloatFn = void (*)(const uint16_t*, float*, size_t);
using FromFloatFn = void (*)(const float*, uint16_t*, size_t);

void HalfToFloatPortable(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}
void FloatToHalfPortable(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
void Bf16ToFloatN(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = BitsToFloat(static_cast<uint32_t>(in[i]) << 16);
}
void FloatToBf16N(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = FloatBits(in[i]);
    const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    out[i] = static_cast<uint16_t>(nan ? ((u >> 16) | 0x0040u) : r);
  }
}

#if defined(__x86_64__)
// F16C: same rounding (nearest-even), same subnormal, inf and NaN handling as the portable path.
__attribute__((target("avx,f16c"))) void HalfToFloatF16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}
__attribute__((target("avx,f16c"))) void FloatToHalfF16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
#endif

struct HalfConverters {
  ToFloatFn to;
  FromFloatFn from;
};

HalfConverters SelectHalfConverters() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx")) return {HalfToFloatF16c, FloatToHalfF16c};
#endif
  return {HalfToFloatPortable, FloatToHalfPortable};
}

const HalfConverters& Fp16() {
  static const HalfConverters c = SelectHalfConverters();
  return c;
}

template <typename F>
HT_INLINE void Apply16(ToFloatFn to, FromFloatFn from, void* out, const void* a, const void* b, size_t count, F f) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  alignas(64) float fa[kTile];
  alignas(64) float fb[kTile];
  for (size_t base = 0; base < count; base += kTile) {
    const size_t n = count - base < kTile ? count - base : kTile;
    to(x + base, fa, n);
    to(y + base, fb, n);
    for (size_t i = 0; i < n; ++i) fa[i] = f(fa[i], fb[i]);
    from(fa, o + base, n);
  }
}

template <typename F>
HT_INLINE void Dispatch(DataType dtype, void* out, const void* a, const void* b, size_t count, F f) {
  switch (dtype) {
    case DataType::kInt8: return Apply<int8_t>(out, a, b, count, f);
    case DataType::kUint8: return Apply<uint8_t>(out, a, b, count, f);
    case DataType::kInt32: return Apply<int32_t>(out, a, b, count, f);
    case DataType::kInt64: return Apply<int64_t>(out, a, b, count, f);
    case DataType::kFloat32: return Apply<float>(out, a, b, count, f);
    case DataType::kFloat64: return Apply<double>(out, a, b, count, f);
    case DataType::kFloat16: return Apply16(Fp16().to, Fp16().from, out, a, b, count, f);
    case DataType::kBfloat16: return Apply16(Bf16ToFloatN, FloatToBf16N, out, a, b, count, f);
  }
}

// Bitwise ops exist only for integer types.
template <typename F>
HT_INLINE void DispatchInt(DataType dtype, void* out, const void* a, const void* b, size_t count, F f) {
  switch (dtype) {
    case DataType::kInt8: return Apply<int8_t>(out, a, b, count, f);
    case DataType::kUint8: return Apply<uint8_t>(out, a, b, count, f);
    case DataType::kInt32: return Apply<int32_t>(out, a, b, count, f);
    case DataType::kInt64: return Apply<int64_t>(out, a, b, count, f);
    default: break;
  }
}

HT_INLINE void ReduceBody(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return Dispatch(dtype, out, a, b, count, Sum{});
    case ReduceOp::kProd: return Dispatch(dtype, out, a, b, count, Prod{});
    case ReduceOp::kMin: return Dispatch(dtype, out, a, b, count, Min{});
    case ReduceOp::kMax: return Dispatch(dtype, out, a, b, count, Max{});
    case ReduceOp::kBand: return DispatchInt(dtype, out, a, b, count, Band{});
    case ReduceOp::kBor: return DispatchInt(dtype, out, a, b, count, Bor{});
    case ReduceOp::kBxor: return DispatchInt(dtype, out, a, b, count, Bxor{});
  }
}

using ReduceFn = void (*)(DataType, ReduceOp, void*, const void*, const void*, size_t);

void ReduceBaseline(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  ReduceBody(dtype, op, out, a, b, count);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void ReduceAvx2(DataType dtype, ReduceOp op, void* out, const void* a, const void* b,
                                                size_t count) {
  ReduceBody(dtype, op, out, a, b, count);
}
#endif

#if defined(__x86_64__)
// 16-bit floats, fused: 8 elements per step are widened in registers, combined in fp32 and rounded back, with no
// fp32 tile written and re-read in between (the tiled path above: 6.1-6.3 GB/s of output in L2 against fp32's
// 30). Same results bit for bit: widening is exact, the fp32 operation is the scalar one (min / max through
// minmax.h's vector forms of Min / Max), and both roundings are the portable ones — F16C's nearest-even for fp16,
// and for bf16 the same integer rounding and quiet-NaN rule as FloatToBf16.
__attribute__((target("avx2"))) HT_INLINE __m256 Combine8(Sum, __m256 a, __m256 b) { return _mm256_add_ps(a, b); }
__attribute__((target("avx2"))) HT_INLINE __m256 Combine8(Prod, __m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
__attribute__((target("avx2"))) HT_INLINE __m256 Combine8(Min, __m256 a, __m256 b) {
  return reduce_internal::Min8(a, b);
}
__attribute__((target("avx2"))) HT_INLINE __m256 Combine8(Max, __m256 a, __m256 b) {
  return reduce_internal::Max8(a, b);
}
__attribute__((target("avx2"))) HT_INLINE __m256 Combine8(Scale s, __m256 a, __m256) {
  return _mm256_mul_ps(a, _mm256_set1_ps(s.inv));
}

__attribute__((target("avx2"))) HT_INLINE __m256 Bf16x8ToFloat(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
__attribute__((target("avx2"))) HT_INLINE void FloatToBf16x8(__m256 f, uint16_t* p) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);  // every lane holds 0..0xffff
  // packus works per 128-bit half: [r0..r3 r0..r3 | r4..r7 r4..r7]; gather the two low quads.
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

template <bool kBf16, typename F>
__attribute__((target("avx2,f16c"))) HT_INLINE void Apply16Fused(void* out, const void* a, const void* b, size_t count,
                                                                 F f) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    if constexpr (kBf16) {
      FloatToBf16x8(Combine8(f, Bf16x8ToFloat(x + i), Bf16x8ToFloat(y + i)), o + i);
    } else {
      const __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      const __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i),
                       _mm256_cvtps_ph(Combine8(f, fx, fy), _MM_FROUND_TO_NEAREST_INT));
    }
  }
  for (; i < count; ++i) {
    o[i] = kBf16 ? FloatToBf16(f(Bf16ToFloat(x[i]), Bf16ToFloat(y[i])))
                 : FloatToHalf(f(HalfToFloat(x[i]), HalfToFloat(y[i])));
  }
}

template <bool kBf16>
__attribute__((target("avx2,f16c"))) void Reduce16Fused(ReduceOp op, void* out, const void* a, const void* b,
                                                        size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return Apply16Fused<kBf16>(out, a, b, count, Sum{});
    case ReduceOp::kProd: return Apply16Fused<kBf16>(out, a, b, count, Prod{});
    case ReduceOp::kMin: return Apply16Fused<kBf16>(out, a, b, count, Min{});
    case ReduceOp::kMax: return Apply16Fused<kBf16>(out, a, b, count, Max{});
    default: return;  // bitwise ops are for integers only
  }
}

// bf16 with AVX-512 (F + BW + DQ): the same rounding in 16 lanes; 2x the AVX2 loop, whose integer rounding is
// what bounds it (fp16 has its conversions in hardware and runs at fp32's speed on AVX2). Still bound by vector
// ALU ops (two ports for 512-bit work): 32 elements by unpacking and packing instead of widening and narrowing,
// and the NaN case folded into the rounding, took 11.5-11.7 GB/s of output in L2 to 12.9-13.1 (kernels bench).
// AVX512_BF16's VCVTNE2PS2BF16 would convert 32 lanes in one instruction but treats subnormal inputs as zero,
// which the portable FloatToBf16 does not.
// The _maskz_ forms with every lane set: GCC 12's plain forms pass an undefined vector that -Wmaybe-uninitialized
// (an error here) reports.
constexpr __mmask16 kAll16 = 0xffff;

__attribute__((target("avx512f,avx512bw"))) HT_INLINE __m512 Combine16(Sum, __m512 a, __m512 b) {
  return _mm512_add_ps(a, b);
}
__attribute__((target("avx512f,avx512bw"))) HT_INLINE __m512 Combine16(Prod, __m512 a, __m512 b) {
  return _mm512_mul_ps(a, b);
}
__attribute__((target("avx512f,avx512bw"))) HT_INLINE __m512 Combine16(Min, __m512 a, __m512 b) {
  return reduce_internal::Min16(a, b);
}
__attribute__((target("avx512f,avx512bw"))) HT_INLINE __m512 Combine16(Max, __m512 a, __m512 b) {
  return reduce_internal::Max16(a, b);
}
__attribute__((target("avx512f,avx512bw"))) HT_INLINE __m512 Combine16(Scale s, __m512 a, __m512) {
  return _mm512_mul_ps(a, _mm512_set1_ps(s.inv));
}

__attribute__((target("avx512f,avx512bw"))) HT_INLINE __m512 Bf16x16ToFloat(const uint16_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll16, _mm512_maskz_cvtepu16_epi32(kAll16, h), 16));
}

// fp32 lanes -> the bf16 each rounds to, in the low 16 bits of its dword: FloatToBf16's rounding, and its quiet
// NaN ((u >> 16) | 0x40) by rounding the NaN with its low half cleared and the quiet bit set, which cannot carry.
__attribute__((target("avx512f,avx512bw,avx512dq"))) HT_INLINE __m512i RoundToBf16x16(__m512 f) {
  const __mmask16 nan = _mm512_fpclass_ps_mask(f, 0x81);  // quiet or signalling NaN
  // (u & 0xffff0000) | 0x00400000 in the NaN lanes (ternary logic 0xEA: A & B | C), u elsewhere.
  const __m512i u = _mm512_mask_ternarylogic_epi32(_mm512_castps_si512(f), nan, _mm512_set1_epi32(~0xffff),
                                                   _mm512_set1_epi32(0x00400000), 0xEA);
  const __m512i lsb = _mm512_and_si512(_mm512_maskz_srli_epi32(kAll16, u, 16), _mm512_set1_epi32(1));
  return _mm512_maskz_srli_epi32(kAll16, _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
}

// 32 elements per step without widening and narrowing instructions: interleaving each 16-bit element with a zero
// word (VPUNPCKLWD / VPUNPCKHWD, per 128-bit lane: elements 0-3 and 4-7 of every 8) puts it in the high half of
// a dword, i.e. makes it an fp32; VPACKUSDW of the two rounded halves puts every lane's 8 elements back in order.
// The element order inside the vectors is shuffled in between, which elementwise arithmetic does not see.
template <typename F>
__attribute__((target("avx512f,avx512bw,avx512dq"))) HT_INLINE void ApplyBf16Avx512(void* out, const void* a,
                                                                                    const void* b, size_t count, F f) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  const __m512i zero = _mm512_setzero_si512();
  for (; i + 32 <= count; i += 32) {
    const __m512i vx = _mm512_loadu_si512(x + i);
    const __m512i vy = _mm512_loadu_si512(y + i);
    const __m512 lo = Combine16(f, _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, vx)),
                                _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, vy)));
    const __m512 hi = Combine16(f, _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, vx)),
                                _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, vy)));
    _mm512_storeu_si512(o + i, _mm512_packus_epi32(RoundToBf16x16(lo), RoundToBf16x16(hi)));
  }
  for (; i + 16 <= count; i += 16) {
    const __m512i r = RoundToBf16x16(Combine16(f, Bf16x16ToFloat(x + i), Bf16x16ToFloat(y + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), _mm512_maskz_cvtepi32_epi16(kAll16, r));
  }
  for (; i < count; ++i) o[i] = FloatToBf16(f(Bf16ToFloat(x[i]), Bf16ToFloat(y[i])));
}

__attribute__((target("avx512f,avx512bw,avx512dq"))) void ReduceBf16Avx512(ReduceOp op, void* out, const void* a,
                                                                           const void* b, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: return ApplyBf16Avx512(out, a, b, count, Sum{});
    case ReduceOp::kProd: return ApplyBf16Avx512(out, a, b, count, Prod{});
    case ReduceOp::kMin: return ApplyBf16Avx512(out, a, b, count, Min{});
    case ReduceOp::kMax: return ApplyBf16Avx512(out, a, b, count, Max{});
    default: return;
  }
}

__attribute__((target("avx2,f16c"))) void ReduceAvx2F16c(DataType dtype, ReduceOp op, void* out, const void* a,
                                                         const void* b, size_t count) {
  if (dtype == DataType::kBfloat16) {
    static const bool avx512 =
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    if (avx512) return ReduceBf16Avx512(op, out, a, b, count);
    return Reduce16Fused<true>(op, out, a, b, count);
  }
  if (dtype == DataType::kFloat16) return Reduce16Fused<false>(op, out, a, b, count);
  ReduceAvx2(dtype, op, out, a, b, count);
}

// ---- fp16 / bf16 avg (kernels.h, "avg"), fused like the 16-bit Reduce above: the tiled portable forms below
// (widen a tile, scale, round) ran at 3.7 GB/s of output for bf16 in L2, slower than memory, which would have
// made the scaling pass cost more than the ring it precedes. Same bits as the portable forms: widening is
// exact, each multiply and add is one IEEE operation (never fused into an FMA: -ffp-contract=off), and the
// roundings are the portable ones.
__attribute__((target("avx512f,avx512bw,avx512dq"))) void ScaleBf16Avx512(void* out, const void* in, size_t count,
                                                                          float inv) {
  ApplyBf16Avx512(out, in, in, count, Scale{inv});
}

__attribute__((target("avx2,f16c"))) void ScaleAvx2F16c(DataType dtype, void* out, const void* in, size_t count,
                                                        float inv) {
  if (dtype == DataType::kBfloat16) {
    static const bool avx512 =
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    if (avx512) return ScaleBf16Avx512(out, in, count, inv);
    return Apply16Fused<true>(out, in, in, count, Scale{inv});
  }
  Apply16Fused<false>(out, in, in, count, Scale{inv});
}

template <bool kBf16>
__attribute__((target("avx2,f16c"))) HT_INLINE __m256 Load16x8(const void* base, size_t at) {
  const uint16_t* p = static_cast<const uint16_t*>(base) + at;
  if constexpr (kBf16) {
    return Bf16x8ToFloat(p);
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
}

// 8 outputs per step: every input widened, scaled and added in registers, rounded once.
template <bool kBf16>
__attribute__((target("avx2,f16c"))) void AverageNAvx2F16c(const void* const* in, int n, size_t first, void* out,
                                                           size_t count, float inv) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const __m256 vinv = _mm256_set1_ps(inv);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256 acc = _mm256_mul_ps(Load16x8<kBf16>(in[0], first + i), vinv);
    for (int k = 1; k < n; ++k) acc = _mm256_add_ps(acc, _mm256_mul_ps(Load16x8<kBf16>(in[k], first + i), vinv));
    if constexpr (kBf16) {
      FloatToBf16x8(acc, o + i);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + i), _mm256_cvtps_ph(acc, _MM_FROUND_TO_NEAREST_INT));
    }
  }
  auto widen = [](uint16_t h) { return kBf16 ? Bf16ToFloat(h) : HalfToFloat(h); };
  for (; i < count; ++i) {
    float acc = widen(static_cast<const uint16_t*>(in[0])[first + i]) * inv;
    for (int k = 1; k < n; ++k) acc = acc + widen(static_cast<const uint16_t*>(in[k])[first + i]) * inv;
    o[i] = kBf16 ? FloatToBf16(acc) : FloatToHalf(acc);
  }
}
#endif

ReduceFn SelectReduce() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return ReduceAvx2F16c;
  if (__builtin_cpu_supports("avx2")) return ReduceAvx2;
#endif
  return ReduceBaseline;
}

}  // namespace

namespace {
// out = a + b for a few floating-point elements (small collectives' blocks) without the dispatched kernel's
// set-up: the same one IEEE addition per element as every kernel, so the same bits.
template <typename T>
void SumFew(void* out, const void* a, const void* b, size_t count) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) o[i] = x[i] + y[i];
}

template <typename T>
void SumFewOfN(void* out, const void* const* in, int n, size_t count) {
  T* o = static_cast<T*>(out);
  for (size_t i = 0; i < count; ++i) {
    T v = static_cast<const T*>(in[0])[i] + static_cast<const T*>(in[1])[i];
    for (int k = 2; k < n; ++k) v += static_cast<const T*>(in[k])[i];
    o[i] = v;
  }
}
}  // namespace

bool SumFewN(DataType dtype, void* out, const void* const* in, int n, size_t count) {
  if (count > kSumFewMax) return false;
  if (dtype == DataType::kFloat32) {
    SumFewOfN<float>(out, in, n, count);
    return true;
  }
  if (dtype == DataType::kFloat64) {
    SumFewOfN<double>(out, in, n, count);
    return true;
  }
  return false;
}

void Reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  if (count == 0) return;
  if (count <= kSumFewMax && op == ReduceOp::kSum) {
    if (dtype == DataType::kFloat32) return SumFew<float>(out, a, b, count);
    if (dtype == DataType::kFloat64) return SumFew<double>(out, a, b, count);
  }
  static const ReduceFn fn = SelectReduce();
  fn(dtype, op, out, a, b, count);
}

void FinalizeAvg(DataType dtype, void* buf, size_t count, int n) {
  if (count == 0 || n <= 1) return;
  switch (dtype) {
    case DataType::kFloat32: {
      float* p = static_cast<float*>(buf);
      const float d = static_cast<float>(n);
      for (size_t i = 0; i < count; ++i) p[i] = p[i] / d;
      return;
    }
    case DataType::kFloat64: {
      double* p = static_cast<double*>(buf);
      const double d = static_cast<double>(n);
      for (size_t i = 0; i < count; ++i) p[i] = p[i] / d;
      return;
    }
    case DataType::kFloat16:
    case DataType::kBfloat16: {
      const bool half = dtype == DataType::kFloat16;
      const ToFloatFn to = half ? Fp16().to : Bf16ToFloatN;
      const FromFloatFn from = half ? Fp16().from : FloatToBf16N;
      uint16_t* p = static_cast<uint16_t*>(buf);
      alignas(64) float f[kTile];
      const float d = static_cast<float>(n);
      for (size_t base = 0; base < count; base += kTile) {
        const size_t m = count - base < kTile ? count - base : kTile;
        to(p + base, f, m);
        for (size_t i = 0; i < m; ++i) f[i] = f[i] / d;
        from(f, p + base, m);
      }
      return;
    }
    default: return;
  }
}

// fp16 / bf16 avg (kernels.h, "avg"): the fused forms above where the CPU has AVX2 and F16C, else tiles of kTile
// elements widened with Reduce's portable converters, scaled (and summed) in fp32, rounded back — the same bits.
#if defined(__x86_64__)
namespace {
bool HasAvx2F16c() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}
}  // namespace
#endif

void ScaleForAvg(DataType dtype, void* out, const void* in, size_t count, int n) {
  if (count == 0 || !AvgScalesInputs(dtype, ReduceOp::kAvg)) return;
  if (n <= 1) {
    if (out != in) std::memmove(out, in, count * sizeof(uint16_t));
    return;
  }
  const float inv = 1.0f / static_cast<float>(n);
#if defined(__x86_64__)
  static const bool fused = HasAvx2F16c();
  if (fused) return ScaleAvx2F16c(dtype, out, in, count, inv);
#endif
  const bool half = dtype == DataType::kFloat16;
  Apply16(half ? Fp16().to : Bf16ToFloatN, half ? Fp16().from : FloatToBf16N, out, in, in, count, Scale{inv});
}

void AverageN(DataType dtype, const void* const* in, int n, size_t first, void* out, size_t count) {
  if (count == 0 || n < 1 || !AvgScalesInputs(dtype, ReduceOp::kAvg)) return;
  const bool half = dtype == DataType::kFloat16;
  const float inv = 1.0f / static_cast<float>(n);
#if defined(__x86_64__)
  static const bool fused = HasAvx2F16c();
  if (fused) {
    return half ? AverageNAvx2F16c<false>(in, n, first, out, count, inv)
                : AverageNAvx2F16c<true>(in, n, first, out, count, inv);
  }
#endif
  const ToFloatFn to = half ? Fp16().to : Bf16ToFloatN;
  const FromFloatFn from = half ? Fp16().from : FloatToBf16N;
  auto input = [&](int k) { return static_cast<const uint16_t*>(in[k]) + first; };
  uint16_t* o = static_cast<uint16_t*>(out);
  alignas(64) float acc[kTile];
  alignas(64) float f[kTile];
  for (size_t base = 0; base < count; base += kTile) {
    const size_t m = std::min(count - base, kTile);
    to(input(0) + base, acc, m);
    for (size_t i = 0; i < m; ++i) acc[i] = acc[i] * inv;
    for (int k = 1; k < n; ++k) {
      to(input(k) + base, f, m);
      for (size_t i = 0; i < m; ++i) acc[i] = acc[i] + f[i] * inv;
    }
    from(acc, o + base, m);
  }
}

constexpr size_t kStreamLine = 64;

void ReduceStreaming(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  if (count == 0) return;
  const size_t es = DataTypeSize(dtype);
  // Tiles of 8 KiB (L1-resident) aligned to `out`'s lines, so each output line is written by one tile.
  constexpr size_t kTileBytes = 8192;
  alignas(64) char tile[kTileBytes];
  char* o = static_cast<char*>(out);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  size_t first = ((kStreamLine - reinterpret_cast<uintptr_t>(o) % kStreamLine) % kStreamLine) / es;
  if (first == 0) first = kTileBytes / es;
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(count - done, done == 0 ? first : kTileBytes / es);
    const size_t off = done * es;
    Reduce(dtype, op, tile, x + off, y + off, n);
    CopyStreamingNoFence(o + off, tile, n * es);
    done += n;
  }
  StreamFence();
}

}  // namespace hccltune

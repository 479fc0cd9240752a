#include "runtime/reduce/kernels.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/common/stream_copy.h"
#include "runtime/reduce/half.h"

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
struct Min {
  template <typename T>
  T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};
struct Max {
  template <typename T>
  T operator()(T a, T b) const {
    return a > b ? a : b;
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

ReduceFn SelectReduce() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return ReduceAvx2;
#endif
  return ReduceBaseline;
}

}  // namespace

void Reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) {
  if (count == 0) return;
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

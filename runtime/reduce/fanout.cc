// ReduceFanout (kernels.h): n inputs combined left to right and the result stored to m outputs in one pass.
//
// Why fused: for the symmetric allreduce at 64 MiB (2 ranks), reducing a tile into L1 and then streaming it to
// each output took 8.1-8.6 ms, the same loop with every load and store in one pass 5.9 ms (AVX-512; AVX2 6.6):
// with reads and writes interleaved the memory controller keeps both directions busy, while a tile's
// read-only then write-only phases leave it idle in turn.
//
// fp32 sum / prod / min / max only (the and the common training case); other types and ops return
// false and the caller tiles with Reduce. Bit-identical to chained Reduce (up to which NaN payload survives when
// two NaNs meet in a sum or product): every lane is one IEEE operation in the same order, and min / max are
// minmax.h's, whose scalar and vector forms give the same bits (NaN-propagating, commutative, -0 < +0).
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "runtime/reduce/kernels.h"
#include "runtime/reduce/minmax.h"

namespace hccltune {
namespace {

#if defined(__x86_64__)
template <ReduceOp kOp>
float Scalar(float a, float b) {
  if constexpr (kOp == ReduceOp::kSum) return a + b;
  if constexpr (kOp == ReduceOp::kProd) return a * b;
  if constexpr (kOp == ReduceOp::kMin) return reduce_internal::FloatMin(a, b);
  if constexpr (kOp == ReduceOp::kMax) return reduce_internal::FloatMax(a, b);
}

// Elements [from, to) one at a time (the unaligned head and the tail).
template <ReduceOp kOp>
void ScalarRange(const float* const* in, int n, float* const* out, int m, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) {
    float v = Scalar<kOp>(in[0][i], in[1][i]);
    for (int k = 2; k < n; ++k) v = Scalar<kOp>(v, in[k][i]);
    for (int k = 0; k < m; ++k) out[k][i] = v;
  }
}

template <ReduceOp kOp>
__attribute__((target("avx512f"))) inline __m512 Op512(__m512 a, __m512 b) {
  if constexpr (kOp == ReduceOp::kSum) return _mm512_add_ps(a, b);
  if constexpr (kOp == ReduceOp::kProd) return _mm512_mul_ps(a, b);
  if constexpr (kOp == ReduceOp::kMin) return reduce_internal::Min16(a, b);
  if constexpr (kOp == ReduceOp::kMax) return reduce_internal::Max16(a, b);
}

// kN > 0: n == m == kN known at compile time (the symmetric allreduce at 2-4 ranks): the loops over inputs and
// outputs unroll and the pointers stay in registers. kN == 0: n and m at run time.
template <ReduceOp kOp, bool kStream, int kN>
__attribute__((target("avx512f"))) void Loop512(const float* const* in, int n, float* const* out, int m, size_t from,
                                                size_t to) {
  const int nn = kN > 0 ? kN : n, mm = kN > 0 ? kN : m;
  for (size_t i = from; i < to; i += 16) {
    __m512 v = Op512<kOp>(_mm512_loadu_ps(in[0] + i), _mm512_loadu_ps(in[1] + i));
#pragma GCC unroll 8
    for (int k = 2; k < nn; ++k) v = Op512<kOp>(v, _mm512_loadu_ps(in[k] + i));
#pragma GCC unroll 8
    for (int k = 0; k < mm; ++k) {
      if constexpr (kStream) {
        _mm512_stream_ps(out[k] + i, v);
      } else {
        _mm512_storeu_ps(out[k] + i, v);
      }
    }
  }
}

template <ReduceOp kOp, bool kStream>
__attribute__((target("avx512f"))) void Body512(const float* const* in, int n, float* const* out, int m, size_t from,
                                                size_t to) {
  if (n == m && n == 2) return Loop512<kOp, kStream, 2>(in, n, out, m, from, to);
  if (n == m && n == 3) return Loop512<kOp, kStream, 3>(in, n, out, m, from, to);
  if (n == m && n == 4) return Loop512<kOp, kStream, 4>(in, n, out, m, from, to);
  Loop512<kOp, kStream, 0>(in, n, out, m, from, to);
}

template <ReduceOp kOp>
__attribute__((target("avx2"))) inline __m256 Op256(__m256 a, __m256 b) {
  if constexpr (kOp == ReduceOp::kSum) return _mm256_add_ps(a, b);
  if constexpr (kOp == ReduceOp::kProd) return _mm256_mul_ps(a, b);
  if constexpr (kOp == ReduceOp::kMin) return reduce_internal::Min8(a, b);
  if constexpr (kOp == ReduceOp::kMax) return reduce_internal::Max8(a, b);
}

template <ReduceOp kOp, bool kStream>
__attribute__((target("avx2"))) void Body256(const float* const* in, int n, float* const* out, int m, size_t from,
                                             size_t to) {
  for (size_t i = from; i < to; i += 8) {
    __m256 v = Op256<kOp>(_mm256_loadu_ps(in[0] + i), _mm256_loadu_ps(in[1] + i));
    for (int k = 2; k < n; ++k) v = Op256<kOp>(v, _mm256_loadu_ps(in[k] + i));
    for (int k = 0; k < m; ++k) {
      if constexpr (kStream) {
        _mm256_stream_ps(out[k] + i, v);
      } else {
        _mm256_storeu_ps(out[k] + i, v);
      }
    }
  }
}

template <ReduceOp kOp>
bool Fanout(const float* const* in, int n, float* const* out, int m, size_t count, bool streaming) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (!avx512 && !avx2) return false;
  // Streamed stores need aligned destinations: all outputs must sit at the same offset within a line.
  const uintptr_t mis = reinterpret_cast<uintptr_t>(out[0]) % 64;
  for (int k = 1; k < m; ++k) {
    if (reinterpret_cast<uintptr_t>(out[k]) % 64 != mis) streaming = false;
  }
  if (mis % sizeof(float) != 0) streaming = false;
  const size_t head = std::min(count, mis == 0 ? size_t{0} : (64 - mis) / sizeof(float));
  const size_t width = avx512 ? 16 : 8;
  const size_t body_end = head + (count - head) / width * width;
  ScalarRange<kOp>(in, n, out, m, 0, head);
  if (avx512) {
    streaming ? Body512<kOp, true>(in, n, out, m, head, body_end) : Body512<kOp, false>(in, n, out, m, head, body_end);
  } else {
    streaming ? Body256<kOp, true>(in, n, out, m, head, body_end) : Body256<kOp, false>(in, n, out, m, head, body_end);
  }
  ScalarRange<kOp>(in, n, out, m, body_end, count);
  if (streaming) _mm_sfence();
  return true;
}
#endif

}  // namespace

bool ReduceFanout(DataType dtype, ReduceOp op, const void* const* in, int n, void* const* out, int m, size_t count,
                  bool streaming) {
#if defined(__x86_64__)
  if (dtype != DataType::kFloat32 || n < 2 || m < 1) return false;
  const auto* fin = reinterpret_cast<const float* const*>(in);
  auto* fout = reinterpret_cast<float* const*>(out);
  switch (op) {
    case ReduceOp::kSum: return Fanout<ReduceOp::kSum>(fin, n, fout, m, count, streaming);
    case ReduceOp::kProd: return Fanout<ReduceOp::kProd>(fin, n, fout, m, count, streaming);
    case ReduceOp::kMin: return Fanout<ReduceOp::kMin>(fin, n, fout, m, count, streaming);
    case ReduceOp::kMax: return Fanout<ReduceOp::kMax>(fin, n, fout, m, count, streaming);
    default: return false;
  }
#else
  (void)dtype, (void)op, (void)in, (void)n, (void)out, (void)m, (void)count, (void)streaming;
  return false;
#endif
}

}  // namespace hccltune

// Floating-point min and max as every reduction kernel computes them (kernels.cc, fanout.cc): scalar and vector
// forms that give the same bits. Internal to runtime/reduce.
//
// Why not `a < b ? a : b` (VMINPS) alone: it returns `b` whenever the operands are unordered or equal, so a NaN
// survived only as the second operand, and min(+0, -0) was -0 one way round and +0 the other. Each algorithm
// combines the ranks' values in its own order (the ring puts the local value first, one_shot goes in rank order,
// and where an element sits in the buffer decides which rank's value a ring step sees first), so a NaN on one rank
// could vanish on some elements and not others, and a signed zero depended on the algorithm. Reductions must not
// depend on operand order, so:
//   Min(a, b) = bits(a < b ? a : b) | bits(b < a ? b : a)
//     - ordered, distinct: both halves are the smaller value, so it is returned unchanged;
//     - +0 and -0: the halves are +0 and -0, their OR is -0 (the IEEE 754-2019 minimum: -0 < +0);
//     - a NaN on either side: one half is that NaN, and ORing anything into a NaN keeps the all-ones exponent and
//       the non-zero fraction, so the result is a NaN (for two NaNs: the OR of both).
//   Max(a, b) = (bits(a > b ? a : b) & bits(b > a ? b : a)) | (all ones if a or b is NaN)
//     - ordered: the larger value; +0 and -0: +0 (AND of the halves);
//     - a NaN on either side: all bits set, a NaN (ANDing would not keep one, hence the unordered mask).
// Both are commutative bit for bit, so every algorithm and operand order gives the same result, and NaN-propagating
// like torch.minimum / torch.maximum. The NaN's payload is not the input's (callers see "a NaN"). Cost: two
// min/max instead of one plus one (min) or three (max) bitwise operations per vector. Kernels bench, 256 KiB (in
// L2), GB/s of output before -> after: fp32 min 56 -> 40, fp32 max 58 -> 50, fp64 max 58 -> 55, fp16 max
// 30.5 -> 19.6 (of which the signed-zero half, the second max and the AND, is 24.5 -> 19.6), bf16 min 35 -> 29,
// fused fp32 max unchanged; at 64 MiB memory bounds them all (fp32 min/max 13 -> 12-13). Accepted: min/max are
// rare next to sum/avg, and one definition for every path is what keeps ranks and algorithms in agreement.
// Integers keep the plain comparison (no NaN, no signed zero).
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace hccltune::reduce_internal {

template <typename T>
using FloatBitsOf = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <typename T>
inline __attribute__((always_inline)) T FloatMin(T a, T b) {
  using U = FloatBitsOf<T>;
  const T lo = a < b ? a : b;
  const T hi = b < a ? b : a;
  return std::bit_cast<T>(static_cast<U>(std::bit_cast<U>(lo) | std::bit_cast<U>(hi)));
}

template <typename T>
inline __attribute__((always_inline)) T FloatMax(T a, T b) {
  using U = FloatBitsOf<T>;
  const T x = a > b ? a : b;
  const T y = b > a ? b : a;
  const U nan = (a != a || b != b) ? ~U{0} : U{0};
  return std::bit_cast<T>(static_cast<U>((std::bit_cast<U>(x) & std::bit_cast<U>(y)) | nan));
}

#if defined(__x86_64__)
// VMINPS / VMAXPS dst, a, b are exactly `a < b ? a : b` / `a > b ? a : b`.
__attribute__((target("avx2"))) inline __attribute__((always_inline)) __m256 Min8(__m256 a, __m256 b) {
  return _mm256_or_ps(_mm256_min_ps(a, b), _mm256_min_ps(b, a));
}
__attribute__((target("avx2"))) inline __attribute__((always_inline)) __m256 Max8(__m256 a, __m256 b) {
  const __m256 both = _mm256_and_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a));
  return _mm256_or_ps(both, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

// AVX-512F only (no DQ for the floating-point OR / AND): the bitwise steps run on the integer view. The _maskz_
// forms with every lane set: GCC 12's plain min/max pass an undefined vector that -Wmaybe-uninitialized reports.
__attribute__((target("avx512f"))) inline __attribute__((always_inline)) __m512 Min16(__m512 a, __m512 b) {
  const __m512i lo = _mm512_castps_si512(_mm512_maskz_min_ps(0xffff, a, b));
  const __m512i hi = _mm512_castps_si512(_mm512_maskz_min_ps(0xffff, b, a));
  return _mm512_castsi512_ps(_mm512_or_si512(lo, hi));
}
__attribute__((target("avx512f"))) inline __attribute__((always_inline)) __m512 Max16(__m512 a, __m512 b) {
  const __m512i x = _mm512_castps_si512(_mm512_maskz_max_ps(0xffff, a, b));
  const __m512i y = _mm512_castps_si512(_mm512_maskz_max_ps(0xffff, b, a));
  const __mmask16 nan = _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(_mm512_and_si512(x, y), nan, _mm512_set1_epi32(-1)));
}
#endif

}  // namespace hccltune::reduce_internal

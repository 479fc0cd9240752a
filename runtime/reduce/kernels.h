// Element-wise reduction kernels used by every reducing algorithm.
//
// Supported: int8 uint8 int32 int64 fp16 bf16 fp32 fp64 with sum prod min max; avg on floating types
// (combined as a sum here, see "avg" below); band bor bxor on integer types. Callers
// check support with CheckReduceSupported() (runtime/common/types.h); an unsupported pair is a programming
// error here (the kernels leave the output untouched).
//
// Numerics: integer sum and prod wrap modulo 2^bits. fp16/bf16 values are widened to fp32, combined, and
// rounded once to nearest-even per call. Floating min/max propagate NaN (a NaN on either side gives a NaN) and
// order signed zeros (-0 < +0: min(+0, -0) = -0, max = +0); both are commutative bit for bit (minmax.h), so
// their result does not depend on the order in which an algorithm meets the ranks' values. Integer min/max are
// the plain comparison. The result of Reduce(out, a, b) depends only on the values of a and b and their order,
// so ranks that combine the same operands in the same order get bit-identical results.
//
// avg (only floating types have it; CheckReduceSupported refuses it for integers):
//   fp32 / fp64: a sum, then FinalizeAvg divides the final sum by n once (their range makes the sum's overflow
//     a non-issue in practice, and this keeps fp32 avg exactly as fast as sum).
//   fp16 / bf16: the sum of the inputs each scaled by 1/n where it enters the reduction — NCCL's PreMulSum.
//     Summing first overflowed: each step's partial is rounded to 16 bits, so two ranks holding 40000 in fp16
//     made a partial of 80000 = inf and an inf average, where the true average (40000) fits (NCCL gets it, and
//     fp16 gradient averaging with ReduceOp.AVG relies on that). With every input scaled first, no partial
//     exceeds the largest |input| (up to rounding), so the result overflows only where the average itself does.
//     ScaleForAvg scales an input into a working buffer (the algorithms that send partials along: ring, trees,
//     recursive doubling / halving); AverageN scales and sums all n inputs in fp32 and rounds once (the
//     algorithms that reduce every input in one place: one_shot, direct, symmetric). Either way each input is
//     scaled exactly once, by x (1/n) in fp32 (exact for n a power of two, one fp32 rounding otherwise), and
//     every fp32 operation is a separate IEEE operation (this code is built with -ffp-contract=off: no FMA on
//     some CPUs and not others), so the same inputs give the same bits on every rank. The price: for fp16 an
//     input whose scaled value falls below the smallest normal (|x| / n < 2^-14) loses bits it kept before (the
//     old sum rounded only at the final division), and one pass over the input where the algorithm used to read
//     it in place (ring); the final division goes away in exchange.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "runtime/common/types.h"

namespace hccltune {

// out[i] = a[i] op b[i] for i < count. `out` may alias `a` or `b` exactly (not partially overlap).
void Reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count);

// A few fp32/fp64 sums in one pass: out[i] = in[0][i] + in[1][i] + ... + in[n-1][i], left to right — the same
// additions in the same order as n - 1 chained Reduce calls, so the same bits — for count <= kSumFewMax, where
// the chained calls' set-up is most of the work (a 4-rank 8-byte allreduce). Returns false and does nothing for
// other dtypes or larger counts. `out` may alias an input exactly. REQUIRES n >= 2.
constexpr size_t kSumFewMax = 16;
bool SumFewN(DataType dtype, void* out, const void* const* in, int n, size_t count);

// inout[i] = inout[i] op in[i].
inline void ReduceInto(DataType dtype, ReduceOp op, void* inout, const void* in, size_t count) {
  Reduce(dtype, op, inout, inout, in, count);
}

// Reduce() with `out` written by non-temporal stores (runtime/common/stream_copy.h), for large outputs nobody
// reads back soon: bit-identical results (the same kernel computes each 8 KiB tile into an L1-resident buffer,
// which is then streamed out), a store fence at the end. `out` may alias `a` or `b` exactly.
void ReduceStreaming(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count);

// Fused many-to-many reduction (the symmetric allreduce): for i < count, v = in[0][i] op in[1][i] op ... op
// in[n-1][i] (left to right, as chained Reduce calls combine them), then out[k][i] = v for every k < m — each
// input read and each output written once, in one pass; with non-temporal stores when `streaming` (and the
// outputs share their alignment), then a store fence. Bit-identical to chained Reduce() (up to which NaN payload
// survives where two NaNs meet in a sum or product: Reduce's compiled loops may swap the operands). Returns false and
// touches nothing where there is no fused kernel (only fp32 sum/prod/min/max with AVX2 or AVX-512 have one;
// avg is not fused): the caller then reduces tile by tile. REQUIRES n >= 2; outputs do not overlap inputs
// other than exactly (in place).
bool ReduceFanout(DataType dtype, ReduceOp op, const void* const* in, int n, void* const* out, int m, size_t count,
                  bool streaming);

// buf[i] /= n for floating types (fp16/bf16 through fp32, rounded once); integer types are left unchanged. The
// algorithms use it for fp32 / fp64 avg only (AvgScalesInputs).
void FinalizeAvg(DataType dtype, void* buf, size_t count, int n);

// True for fp16 / bf16 avg: the inputs are scaled by 1/n where they enter the reduction (ScaleForAvg, AverageN)
// and the result needs no FinalizeAvg.
inline bool AvgScalesInputs(DataType dtype, ReduceOp op) {
  return op == ReduceOp::kAvg && (dtype == DataType::kFloat16 || dtype == DataType::kBfloat16);
}

// fp16 / bf16: out[i] = in[i] x (1/n), widened to fp32, multiplied by the fp32 reciprocal of n and rounded once
// (n <= 1: a plain copy). `out` may alias `in` exactly. Other dtypes: a programming error (nothing written).
void ScaleForAvg(DataType dtype, void* out, const void* in, size_t count, int n);

// fp16 / bf16, n >= 1: out[i] = in[0][first+i] x (1/n) + in[1][first+i] x (1/n) + ... + in[n-1][first+i] x (1/n),
// in fp32 left to right, rounded once — the average of n inputs reduced in one place. `out` does not overlap the
// inputs (other than exactly, as out == in[k] + first). Other dtypes: a programming error (nothing written).
void AverageN(DataType dtype, const void* const* in, int n, size_t first, void* out, size_t count);

}  // namespace hccltune

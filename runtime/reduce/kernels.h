// Element-wise reduction kernels used by every reducing algorithm.
//
// Supported: int8 uint8 int32 int64 fp16 bf16 fp32 fp64 with sum prod min max; avg on floating types
// (accumulated as a sum here; FinalizeAvg divides once at the end); band bor bxor on integer types. Callers
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
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "runtime/common/types.h"

namespace hccltune {

// out[i] = a[i] op b[i] for i < count. `out` may alias `a` or `b` exactly (not partially overlap).
void Reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count);

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

// buf[i] /= n for floating types (fp16/bf16 through fp32, rounded once); integer types are left unchanged.
void FinalizeAvg(DataType dtype, void* buf, size_t count, int n);

}  // namespace hccltune

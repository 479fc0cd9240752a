// Helpers shared by the algorithm implementations (not part of the public API).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/algorithms/algorithm.h"
#include "runtime/common/status_macros.h"
#include "runtime/reduce/kernels.h"

namespace hccltune::algo {

// The group as this call sees it: the endpoint for config.link and its optional abilities (asked once, here),
// this rank, the group size, the element size.
struct Group {
  Endpoint* ep = nullptr;
  EndpointCapabilities caps;
  int rank = 0;
  int size = 1;
  size_t dsize = 1;
};

inline absl::StatusOr<Group> Open(const CollectiveArgs& args, const Configuration& config, AlgorithmContext& ctx) {
  absl::StatusOr<Endpoint*> ep = ctx.GetEndpoint(config.link);
  if (!ep.ok()) return ep.status();
  if (*ep == nullptr) return absl::InternalError("AlgorithmContext::GetEndpoint returned null");
  Group g;
  g.ep = *ep;
  g.caps = g.ep->capabilities();
  g.rank = g.ep->rank();
  g.size = g.ep->size();
  g.dsize = DataTypeSize(args.dtype);
  if (g.size < 1 || g.rank < 0 || g.rank >= g.size) {
    return absl::InternalError(absl::StrCat("endpoint has rank ", g.rank, " of size ", g.size));
  }
  return g;
}

// Balanced partition of `count` elements into `parts` blocks: the first count % parts blocks get one more.
inline size_t BlockStart(size_t count, int parts, int i) {
  const size_t p = static_cast<size_t>(parts);
  const size_t idx = static_cast<size_t>(i);
  return count / p * idx + std::min(idx, count % p);
}
inline size_t BlockCount(size_t count, int parts, int i) {
  return count / static_cast<size_t>(parts) + (static_cast<size_t>(i) < count % static_cast<size_t>(parts) ? 1 : 0);
}

inline char* At(void* base, size_t elems, size_t dsize) { return static_cast<char*>(base) + elems * dsize; }
inline const char* At(const void* base, size_t elems, size_t dsize) {
  return static_cast<const char*>(base) + elems * dsize;
}

// memmove unless source and destination are the same (in-place calls).
inline void CopyBytes(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) std::memmove(dst, src, bytes);
}
// CopyBytes into the call's output: with non-temporal stores when `dst` is in the stream region (and does not
// overlap `src`).
inline void CopyOut(const CollectiveArgs& a, void* dst, const void* src, size_t bytes) {
  const char* d = static_cast<const char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (a.stream.Contains(dst, bytes) && (d + bytes <= s || s + bytes <= d)) {
    CopyStreaming(dst, src, bytes);
  } else {
    CopyBytes(dst, src, bytes);
  }
}

inline int Mod(int a, int n) { return ((a % n) + n) % n; }

// Largest power of two <= n (n >= 1).
inline int FloorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
inline int CeilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

// Elements per pipelined chunk for `chunk` bytes (at least one element).
inline size_t ChunkElems(uint64_t chunk_bytes, size_t dsize) {
  const size_t e = static_cast<size_t>(chunk_bytes / dsize);
  return e == 0 ? 1 : e;
}
inline size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

// The reduce op used inside the algorithm: avg combines as a sum (finished as below).
// Outputs inside the call's stream region (a large call's output buffer) are written with non-temporal stores.
inline void Combine(const CollectiveArgs& a, void* out, const void* x, const void* y, size_t count) {
  if (a.stream.Contains(out, count * DataTypeSize(a.dtype))) {
    ReduceStreaming(a.dtype, a.op, out, x, y, count);
  } else {
    Reduce(a.dtype, a.op, out, x, y, count);
  }
}
// The Combiner for RecvReduceEndpoint::IrecvReduce: out = local op incoming, as Combine(args, out, local, incoming).
inline void CombineThunk(const Combiner& c, void* out, const void* local, const void* in, size_t elems) {
  const auto dtype = static_cast<DataType>(c.dtype);
  const auto op = static_cast<ReduceOp>(c.op);
  if (c.stream.Contains(out, elems * c.elem_bytes)) {
    ReduceStreaming(dtype, op, out, local, in, elems);
  } else {
    Reduce(dtype, op, out, local, in, elems);
  }
}
// The same with the operands the other way round: out = incoming op local, for algorithms that put the lower
// rank's operand first (every op here is commutative: the same values either way, up to which NaN payload survives
// where two NaNs meet, kernels.h).
inline void CombineThunkIncomingFirst(const Combiner& c, void* out, const void* local, const void* in, size_t elems) {
  CombineThunk(c, out, in, local, elems);
}
inline Combiner MakeCombiner(const CollectiveArgs& a, bool incoming_first = false) {
  Combiner c;
  c.elem_bytes = DataTypeSize(a.dtype);
  c.combine = incoming_first ? CombineThunkIncomingFirst : CombineThunk;
  c.dtype = static_cast<int>(a.dtype);
  c.op = static_cast<int>(a.op);
  c.stream = a.stream;
  return c;
}

// Receive-and-reduce for the doubling and tree algorithms: out = local op incoming (incoming_first: incoming op
// local) over `elems` elements of `peer`'s next message, `local` being this rank's operand. Straight out of the
// transport where the endpoint can (IrecvReduce), else received into `stage` (elems elements, see Stages()) and
// reduced from there — the same messages and results either way. Waits for the receive. `out` and `local` alias
// exactly or not at all; neither is `stage`.
class PeerReduce {
 public:
  PeerReduce(const CollectiveArgs& a, const Group& g)
      : args_(a),
        g_(g),
        stages_(g.caps.recv_reduce == nullptr),
        combiners_{MakeCombiner(a), MakeCombiner(a, /*incoming_first=*/true)} {}
  // Whether From needs a staging buffer (the endpoint cannot reduce in its transport).
  bool Stages() const { return stages_; }
  absl::Status From(int peer, char* out, const char* local, size_t elems, char* stage, bool incoming_first) const {
    if (!stages_) {
      return g_.ep->Wait(
          g_.caps.recv_reduce->IrecvReduce(peer, out, local, elems * g_.dsize, &combiners_[incoming_first ? 1 : 0]));
    }
    const absl::Status s = g_.ep->Recv(peer, stage, elems * g_.dsize);
    if (!s.ok()) return s;
    Combine(args_, out, incoming_first ? stage : local, incoming_first ? local : stage, elems);
    return absl::OkStatus();
  }
  // The lower rank's operand first.
  absl::Status LowerFirst(int peer, char* out, const char* local, size_t elems, char* stage) const {
    return From(peer, out, local, elems, stage, /*incoming_first=*/peer < g_.rank);
  }

 private:
  const CollectiveArgs& args_;
  const Group& g_;
  const bool stages_;
  Combiner combiners_[2];  // local first, incoming first
};

// How avg is finished (kernels.h, "avg"), one rule for every algorithm:
//   fp32 / fp64: a sum, divided by n once, on the final value before it is copied to other ranks
//     (MaybeFinalizeAvg at the point where each element's value is complete, on the one rank that computed it).
//   fp16 / bf16 (ScalesInputs): every rank's input is scaled by 1/n exactly once, where it enters the reduction,
//     and the rest is a plain sum with no final division, so no partial overflows where the average fits.
//     Where the algorithm copies its input into a working buffer before sending partials on (ring, double_ring,
//     binomial trees, recursive doubling / halving, hierarchical), the copy is the scaling (EnterInput) — and
//     anything sent raw (a folded-out rank's input) is scaled first. Where one rank reduces all n raw inputs
//     itself (one_shot, direct, symmetric), it scales each while summing in fp32 and rounds once (CombineAll,
//     AverageN). Scaling at entry rather than accumulating partials in fp32 works the same for every algorithm,
//     including those whose partials travel between ranks in the dtype; and since scaling is a deterministic
//     function of one input, results stay bit-identical on every rank exactly as for sum.
inline bool ScalesInputs(const CollectiveArgs& a) { return AvgScalesInputs(a.dtype, a.op); }
inline bool DividesAtEnd(const CollectiveArgs& a) { return a.op == ReduceOp::kAvg && !ScalesInputs(a); }

inline void MaybeFinalizeAvg(const CollectiveArgs& a, void* buf, size_t count, int n) {
  if (DividesAtEnd(a)) FinalizeAvg(a.dtype, buf, count, n);
}

// `count` elements of this rank's input entering the reduction in a working buffer: dst = src x (1/n) for
// fp16 / bf16 avg, else a copy (CopyBytes: nothing when dst == src). dst and src are equal or disjoint.
inline void EnterInput(const CollectiveArgs& a, void* dst, const void* src, size_t count, int n) {
  if (ScalesInputs(a)) {
    ScaleForAvg(a.dtype, dst, src, count, n);
  } else {
    CopyBytes(dst, src, count * DataTypeSize(a.dtype));
  }
}

// out = in[0] op in[1] op ... op in[n-1] (rank order), avg finished: one rank reducing all n raw inputs.
// fp16 / bf16 avg: AverageN (each input scaled once, summed in fp32, rounded once), through an L1 tile and
// non-temporal stores when `out` is in the call's stream region. REQUIRES n >= 2.
inline void CombineAll(const CollectiveArgs& a, void* out, const void* const* in, int n, size_t count) {
  if (ScalesInputs(a)) {
    const size_t dsize = DataTypeSize(a.dtype);
    if (!a.stream.Contains(out, count * dsize)) return AverageN(a.dtype, in, n, 0, out, count);
    alignas(64) char tile[8192];
    for (size_t i = 0; i < count; i += sizeof(tile) / dsize) {
      const size_t t = std::min(sizeof(tile) / dsize, count - i);
      AverageN(a.dtype, in, n, i, tile, t);
      CopyStreamingNoFence(At(out, i, dsize), tile, t * dsize);
    }
    return StreamFence();
  }
  // A few elements: one pass instead of n - 1 chained calls (the same additions in the same order).
  if (a.op == ReduceOp::kSum && count <= kSumFewMax && !a.stream.Contains(out, count * DataTypeSize(a.dtype)) &&
      SumFewN(a.dtype, out, in, n, count)) {
    return;
  }
  Combine(a, out, in[0], in[1], count);
  for (int k = 2; k < n; ++k) Combine(a, out, out, in[k], count);
  MaybeFinalizeAvg(a, out, count, n);
}

}  // namespace hccltune::algo

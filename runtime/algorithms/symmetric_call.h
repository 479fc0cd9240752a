// What the `symmetric` algorithms share (allreduce, allgather, reducescatter, broadcast on buffers in symmetric
// memory, Communicator::AllocSymmetric): the entry round that tells every rank where every other rank's
// buffers are mapped here, and the exit round. Between the two, an algorithm reads its peers' inputs and writes
// their outputs with plain loads and stores; no data message is sent.
//
// Entry: every rank sends each peer a 56-byte header — the allocation and offset of its send and recv buffers
// (or "unused"), the count and the root — and receives theirs. Since every rank sees the same headers, every
// rank reaches the same verdict: a buffer outside symmetric memory, or counts or roots that differ, is an
// InvalidArgument on every rank at once (naming the rank), never a wait for a rank that gave up. After the round
// every rank has entered the call: its input is in place and its output may be written.
// Exit: a one-byte message to and from every peer saying whether the sender did its part; no rank returns
// (reuses its input, reads its output) before every rank has finished reading and writing, and a rank that could
// not do its part (it had freed an allocation a peer passed) makes the call fail on every rank, naming it.
//
// Ranks may pass different offsets, even different allocations: each header names its own.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/algorithms/internal.h"

namespace hccltune::algo {

// An L1 tile for reductions the fused kernel does not cover.
inline constexpr size_t kSymmetricTileBytes = 32u << 10;

// The slice [begin, end) of `count` elements that rank r of n reduces in a symmetric allreduce: whole cache
// lines, so no two ranks write one line.
void SymmetricSlice(size_t count, size_t dsize, int n, int r, size_t* begin, size_t* end);

// out[k][0..count) = in[0] op in[1] op ... op in[n-1] (rank order; avg finished as internal.h says) for every k < m:
// one fused pass where ReduceFanout has a kernel, else through `tile` (kSymmetricTileBytes); non-temporal stores when
// the call streams (args.stream set).
void SymmetricReduce(const CollectiveArgs& args, const void* const* in, int n, void* const* out, int m, size_t count,
                     char* tile);

class SymmetricCall {
 public:
  // Scratch bytes Enter needs for a group of n, a multiple of 64 (the caller's scratch region may hold more
  // after them).
  static size_t ScratchBytes(int n);

  // The entry round. `send` / `recv` of `send_bytes` / `recv_bytes` are this rank's buffers (send null or 0
  // bytes: unused, as for broadcast, which reads the root's recv). `scratch` holds ScratchBytes(g.size) bytes and
  // stays untouched by the caller until Leave.
  static absl::StatusOr<SymmetricCall> Enter(const Group& g, const AlgorithmContext& ctx, const CollectiveArgs& args,
                                             const void* send, size_t send_bytes, const void* recv, size_t recv_bytes,
                                             void* scratch);

  // Rank q's send / recv buffer, as mapped in this process (q = this rank: its own).
  const char* send(int q) const { return send_[q]; }
  char* recv(int q) const { return recv_[q]; }

  // The exit round; `done`: this rank did its part. Fails when a peer did not (naming it).
  absl::Status Leave(bool done = true) const;

 private:
  SymmetricCall() = default;
  const Group* g_ = nullptr;
  const char** send_ = nullptr;
  char** recv_ = nullptr;
  char* done_ = nullptr;  // every rank's exit flag (scratch)
  absl::string_view what_;
};

}  // namespace hccltune::algo

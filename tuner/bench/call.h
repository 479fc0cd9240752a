// One collective call of the bench/sweep at a byte size (CONVENTIONS.md, Sizes), with its buffers.
// Shared by `hccl-tune bench` and `hccl-tune sweep` so both time exactly the same call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/api/communicator.h"
#include "runtime/common/types.h"

namespace hccltune::bench {

// Elements per rank block for a byte size (CONVENTIONS.md, Sizes).
size_t CountFor(Collective c, uint64_t bytes, DataType t, int n);

struct Buffers {
  std::vector<uint8_t> send, recv;
  std::vector<size_t> counts, displs;
};

struct CallSpec {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
  // Broadcast only: in place on every rank (recv is both buffers), as MPI_Bcast and torch's broadcast are.
  bool in_place = false;
};

// Buffers for `bytes` on `rank` of `n`, the send side filled with the checker's input; sets *count.
Buffers MakeBuffers(const CallSpec& spec, int rank, int n, uint64_t bytes, size_t* count);

// Runs one call of `spec` with `count` elements per block on buffers sized for it.
absl::Status Call(Communicator& comm, const CallSpec& spec, size_t count, Buffers& b, const CallOptions& co);

}  // namespace hccltune::bench

// One collective call of the bench/sweep at a byte size (docs/CONVENTIONS.md, Sizes), with its buffers.
// Shared by `hccl-tune bench` and `hccl-tune sweep` so both time exactly the same call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/api/communicator.h"
#include "runtime/common/types.h"

namespace hccltune::bench {

// Elements per rank block for a byte size (docs/CONVENTIONS.md, Sizes).
size_t CountFor(Collective c, uint64_t bytes, DataType t, int n);

// A call buffer: heap memory, or a view of memory the communicator handed out (`--symmetric`: AllocSymmetric).
class ByteBuffer {
 public:
  uint8_t* data() { return view_ != nullptr ? view_ : heap_.data(); }
  size_t size() const { return view_ != nullptr ? view_bytes_ : heap_.size(); }
  uint8_t* begin() { return data(); }
  uint8_t* end() { return data() + size(); }
  // Heap only (a view keeps its size).
  void resize(size_t bytes) { heap_.resize(bytes); }
  // From now on the buffer is [p, p + bytes), not owned; the heap memory is released.
  void View(uint8_t* p, size_t bytes) {
    view_ = p;
    view_bytes_ = bytes;
    std::vector<uint8_t>().swap(heap_);
  }

 private:
  std::vector<uint8_t> heap_;
  uint8_t* view_ = nullptr;
  size_t view_bytes_ = 0;
};

struct Buffers {
  ByteBuffer send, recv;
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

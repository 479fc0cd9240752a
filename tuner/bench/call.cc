#include "tuner/bench/call.h"

#include <algorithm>

#include "tuner/bench/check.h"

namespace hccltune::bench {

// Elements per rank block for a byte size (docs/CONVENTIONS.md, Sizes).
size_t CountFor(Collective c, uint64_t bytes, DataType t, int n) {
  const uint64_t es = DataTypeSize(t);
  switch (c) {
    case Collective::kAllgather:
    case Collective::kAllgatherv:
    case Collective::kGather:
    case Collective::kReducescatter:
    case Collective::kScatter:
    case Collective::kAlltoall:
    case Collective::kAlltoallv: return static_cast<size_t>(bytes / es / static_cast<uint64_t>(n));
    default: return static_cast<size_t>(bytes / es);
  }
}

absl::Status Call(Communicator& comm, const CallSpec& o, size_t count, Buffers& b, const CallOptions& co) {
  const int n = comm.size();
  switch (o.collective) {
    case Collective::kAllreduce: return comm.Allreduce(b.send.data(), b.recv.data(), count, o.dtype, o.op, co);
    case Collective::kAllgather: return comm.Allgather(b.send.data(), b.recv.data(), count, o.dtype, co);
    case Collective::kAllgatherv: return comm.Allgatherv(b.send.data(), b.recv.data(), b.counts, b.displs, o.dtype, co);
    case Collective::kReducescatter: return comm.Reducescatter(b.send.data(), b.recv.data(), count, o.dtype, o.op, co);
    case Collective::kBroadcast:
      return comm.Broadcast(o.in_place ? b.recv.data() : b.send.data(), b.recv.data(), count, o.dtype, o.root, co);
    case Collective::kReduce: return comm.Reduce(b.send.data(), b.recv.data(), count, o.dtype, o.op, o.root, co);
    case Collective::kGather: return comm.Gather(b.send.data(), b.recv.data(), count, o.dtype, o.root, co);
    case Collective::kScatter: return comm.Scatter(b.send.data(), b.recv.data(), count, o.dtype, o.root, co);
    case Collective::kAlltoall: return comm.Alltoall(b.send.data(), b.recv.data(), count, o.dtype, co);
    case Collective::kAlltoallv:
      return comm.Alltoallv(b.send.data(), b.counts, b.displs, b.recv.data(), b.counts, b.displs, o.dtype, co);
    case Collective::kBarrier: return comm.Barrier(co);
    case Collective::kSendRecv: {
      // Ping-pong between ranks 0 and 1; other ranks idle.
      const size_t bytes = count * DataTypeSize(o.dtype);
      (void)bytes;
      if (comm.rank() == 0 && n > 1) {
        if (absl::Status s = comm.Send(b.send.data(), count, o.dtype, 1); !s.ok()) return s;
        return comm.Recv(b.recv.data(), count, o.dtype, 1);
      }
      if (comm.rank() == 1) {
        if (absl::Status s = comm.Recv(b.recv.data(), count, o.dtype, 0); !s.ok()) return s;
        return comm.Send(b.recv.data(), count, o.dtype, 0);
      }
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

Buffers MakeBuffers(const CallSpec& spec, int rank, int n, uint64_t bytes, size_t* count) {
  *count = CountFor(spec.collective, bytes, spec.dtype, n);
  CheckCase cc{spec.collective, spec.dtype, spec.op, rank, n, spec.root, *count};
  Buffers b;
  const size_t es = DataTypeSize(spec.dtype);
  b.send.resize(std::max<size_t>(1, std::max(SendElements(cc), *count) * es));
  b.recv.resize(std::max<size_t>(1, std::max(RecvElements(cc), *count * static_cast<size_t>(n)) * es));
  FillInput(cc, b.send.data());
  for (int r = 0; r < n; ++r) {
    b.counts.push_back(*count);
    b.displs.push_back(static_cast<size_t>(r) * *count);
  }
  return b;
}

}  // namespace hccltune::bench

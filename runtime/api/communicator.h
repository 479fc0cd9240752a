// hccltune::Communicator — a group of ranks that run collectives together.
//
// Creation: Communicator::Create(rank, size, store, env) for embedding (threads or processes sharing a
// Store), or Communicator::FromEnvironment(env) for `env://` bootstrap from torchrun / Open MPI / Slurm
// variables (see docs/ENVIRONMENT.md and Bootstrap below). Every rank of the group must create it; setup
// fails after HCCL_CONNECT_TIMEOUT with an error naming the ranks that never arrived. At setup the ranks check
// that they speak the same wire protocol, that no two ranks on one node claim the same device, and that
// everything deciding a configuration (HCCL_ALGO, HCCL_TUNE_ALGO, HCCL_BUFFSIZE, HCCL_TUNE_MODE, table
// version) is identical everywhere.
//
// Calls: every collective takes a configuration in canonical form (docs/CONVENTIONS.md) or "auto" (the selector's
// choice). Buffer layout per collective: runtime/algorithms/algorithm.h. In place: pass the same pointer as
// send and recv (for allgather/gather the send block inside recv); for buffers that overlap any other way the
// input is copied first (a warning, once). Every rank ends with bit-identical results
// whatever the algorithm. Errors (bad arguments, ranks that disagree on the call, a dead or stuck peer after
// HCCL_EXEC_TIMEOUT) are returned as Status naming the ranks and values; after a communication error the
// communicator is broken and every later call fails. A bad argument returns InvalidArgument at once and leaves
// this rank's communicator usable; the call still uses up its operation number, and the rank says why in the
// store ("refused/<operation>"). Ranks that passed their own checks and wait in that call find it within one
// blocked slice (~50 ms) and fail naming the refusing rank and its reason (instead of waiting until
// HCCL_EXEC_TIMEOUT) — a failure that breaks the communicator, which the refusing rank's next call then reports
// (when it waits a slice or meets the others' state). When every rank refuses the same call, nobody waits and the
// communicator stays usable everywhere. A refusal costs one store round trip; its key stays in the store. A
// verdict the ranks reach together (the symmetric algorithms' header round) is not a refusal: nobody waits.
//
// Threading: calls from several threads are serialised. Non-blocking variants (I*) return a Work handle; a
// progress thread per communicator runs queued work in issue order; a blocking call issued while work is
// queued waits behind it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/bootstrap/store.h"
#include "runtime/common/config.h"
#include "runtime/common/types.h"

namespace hccltune {

inline constexpr uint32_t kWireProtocolVersion = 1;
// "auto" runs a collective on symmetric buffers with `symmetric` from this many bytes (docs/CONVENTIONS.md, Sizes):
// below it the two message rounds cost more than the copies they save. Measured with `hccl-tune bench
// --symmetric --algo symmetric` against auto on ordinary buffers, 3 interleaved runs on a 2-core VM:
// 2 ranks win from 1 KiB (allreduce) or 2 KiB; 4 ranks on 2 cores pay ~7 us for the two rounds and
// win from 4 KiB (allreduce), 8 KiB (reducescatter), 16 KiB (allgather, broadcast).
inline constexpr uint64_t SymmetricFromBytes(Collective c, int ranks) {
  const bool two = ranks <= 2;
  switch (c) {
    case Collective::kAllreduce: return two ? 1024 : 4096;
    case Collective::kReducescatter: return two ? 2048 : 8192;
    default: return two ? 2048 : 16384;  // allgather, broadcast
  }
}

// Per-call options.
struct CallOptions {
  std::string config = "auto";  // canonical configuration string, or "auto"
};

// What the runtime reports for every collective call (docs/CONVENTIONS.md, Timing: per-rank call duration).
struct TimingSample {
  Collective collective;
  DataType dtype;
  uint64_t bytes;
  int world_size;
  std::string configuration;
  uint64_t sequence;
  double duration_us;
};

// Receives timing samples. Record() runs on the calling thread right after each collective: keep it cheap
// (the tuning client aggregates and sends in the background). Default: none installed.
class TimingSink {
 public:
  virtual ~TimingSink() = default;
  virtual void Record(const TimingSample& sample) = 0;
};

// The link this rank last moved a collective's data over with one peer (Communicator::LinksUsed).
struct PeerLink {
  int peer = -1;
  std::string type;           // "shm" or "tcp"
  std::string local_address;  // tcp: this rank's address on the connection ("10.77.1.1"); shm: ""
  std::string peer_address;   // tcp: the peer's address on it; shm: ""
  int lanes = 0;              // connections (TCP channels); 1 for shm
  uint32_t operation = 0;     // that collective's operation number (the communicator's count of collectives)
};

// Handle for a non-blocking call. Thread-safe.
class Work {
 public:
  virtual ~Work() = default;
  virtual bool Test() = 0;          // complete (successfully or not)?
  virtual absl::Status Wait() = 0;  // blocks until complete; returns the call's status
};

class Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(int rank, int size, std::shared_ptr<Store> store,
                                                              const Environment& env);
  // env:// bootstrap. Ranks from torchrun (RANK/WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_*) or Slurm
  // (SLURM_PROCID/SLURM_NTASKS). Rendezvous: HCCL_TUNE_STORE=file://DIR, else HCCL_TUNE_MASTER_ADDR/PORT,
  // else MASTER_ADDR with port MASTER_PORT+1 (MASTER_PORT itself is torch's TCPStore under torchrun), where
  // rank 0 serves hccl-tune's own store.
  static absl::StatusOr<std::unique_ptr<Communicator>> FromEnvironment(const Environment& env);
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank within this rank's node and the number of ranks on it.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int num_nodes() const = 0;
  // Topology fingerprint and its canonical JSON (docs/CONVENTIONS.md).
  virtual const std::string& fingerprint() const = 0;
  virtual const std::string& topology_json() const = 0;
  // The configuration "auto" resolves to for a call (what would run).
  virtual absl::StatusOr<std::string> ResolveConfig(Collective c, DataType dtype, uint64_t bytes,
                                                    const std::string& config) const = 0;
  // The algorithms of `c` that apply to this group's size and topology (registry order).
  virtual std::vector<std::string> ValidAlgorithms(Collective c) const = 0;
  // The configuration the last completed call ran with.
  virtual std::string last_config() const = 0;
  // For every peer this rank has exchanged a collective's data with, the link of the latest such collective (by
  // peer; calls completed so far, queued non-blocking work not included; point-to-point and calls on symmetric
  // memory, which send no messages, are not counted). Not collective: it reads what the transport recorded.
  virtual std::vector<PeerLink> LinksUsed() const = 0;
  // Hot-path allocations beyond the preallocated buffer ("fallback to malloc").
  virtual uint64_t fallback_allocations() const = 0;

  virtual void SetTimingSink(std::shared_ptr<TimingSink> sink) = 0;

  // --- collectives (counts in elements; layout in runtime/algorithms/algorithm.h) ---
  virtual absl::Status Allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                 const CallOptions& opt = {}) = 0;
  virtual absl::Status Allgather(const void* send, void* recv, size_t count, DataType dtype,
                                 const CallOptions& opt = {}) = 0;
  virtual absl::Status Allgatherv(const void* send, void* recv, absl::Span<const size_t> counts,
                                  absl::Span<const size_t> displs, DataType dtype, const CallOptions& opt = {}) = 0;
  virtual absl::Status Reducescatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                     const CallOptions& opt = {}) = 0;
  virtual absl::Status Broadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                 const CallOptions& opt = {}) = 0;
  virtual absl::Status Reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root,
                              const CallOptions& opt = {}) = 0;
  virtual absl::Status Gather(const void* send, void* recv, size_t count, DataType dtype, int root,
                              const CallOptions& opt = {}) = 0;
  virtual absl::Status Scatter(const void* send, void* recv, size_t count, DataType dtype, int root,
                               const CallOptions& opt = {}) = 0;
  virtual absl::Status Alltoall(const void* send, void* recv, size_t count, DataType dtype,
                                const CallOptions& opt = {}) = 0;
  virtual absl::Status Alltoallv(const void* send, absl::Span<const size_t> send_counts,
                                 absl::Span<const size_t> send_displs, void* recv, absl::Span<const size_t> recv_counts,
                                 absl::Span<const size_t> recv_displs, DataType dtype, const CallOptions& opt = {}) = 0;
  virtual absl::Status Barrier(const CallOptions& opt = {}) = 0;
  // This rank will not make a collective call of kind `c` that the other ranks make: a layer above refused it
  // (e.g. the PyTorch backend's tensor checks, which run before the communicator sees a call). The refusal takes
  // the operation number the call would have taken and is announced like the communicator's own refusals: the
  // other ranks, if already waiting in the call, fail naming this rank and `why` after one blocked slice instead
  // of waiting out HCCL_EXEC_TIMEOUT (and their failure breaks the communicator everywhere); when every rank
  // refuses alike, nobody waits and the communicator stays usable. Ordered behind queued non-blocking work like a
  // call. Returns InvalidArgument with `why` (or the communicator's failure when it is broken, numbering nothing).
  // `c` must not be kSendRecv (point-to-point takes no operation number).
  virtual absl::Status RefuseCall(Collective c, absl::string_view why) = 0;
  // Point-to-point over the default link; matched in order per pair. A Send completes once its bytes are in the
  // transport: without the receiver only while they fit it (over shm one ring, min(4 MiB, HCCL_BUFFSIZE / (local
  // ranks - 1)), 1 MiB when the ranks outnumber the CPUs); larger messages complete as the receiver reads them,
  // so two ranks that both Send before they Recv must stay below that (MPI's eager limit, likewise).
  virtual absl::Status Send(const void* data, size_t count, DataType dtype, int peer) = 0;
  virtual absl::Status Recv(void* data, size_t count, DataType dtype, int peer) = 0;

  // --- non-blocking: same arguments; buffers must stay valid until the Work completes ---
  virtual std::shared_ptr<Work> Iallreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                           const CallOptions& opt = {}) = 0;
  virtual std::shared_ptr<Work> Iallgather(const void* send, void* recv, size_t count, DataType dtype,
                                           const CallOptions& opt = {}) = 0;
  virtual std::shared_ptr<Work> Ireducescatter(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                               const CallOptions& opt = {}) = 0;
  virtual std::shared_ptr<Work> Ibroadcast(const void* send, void* recv, size_t count, DataType dtype, int root,
                                           const CallOptions& opt = {}) = 0;
  virtual std::shared_ptr<Work> Ireduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                                        int root, const CallOptions& opt = {}) = 0;
  virtual std::shared_ptr<Work> Ialltoall(const void* send, void* recv, size_t count, DataType dtype,
                                          const CallOptions& opt = {}) = 0;
  virtual std::shared_ptr<Work> Ibarrier(const CallOptions& opt = {}) = 0;
  // Runs an arbitrary call on the progress thread, after everything queued before it (used by the generic
  // non-blocking wrappers of the C ABI and the torch backend).
  virtual std::shared_ptr<Work> Enqueue(std::function<absl::Status(Communicator&)> call) = 0;
  // The remaining non-blocking variants, queued in issue order like the ones above (counts and displacements,
  // like buffers, must stay valid until the Work completes).
  std::shared_ptr<Work> Iallgatherv(const void* send, void* recv, absl::Span<const size_t> counts,
                                    absl::Span<const size_t> displs, DataType dtype, const CallOptions& opt = {}) {
    return Enqueue([=](Communicator& c) { return c.Allgatherv(send, recv, counts, displs, dtype, opt); });
  }
  std::shared_ptr<Work> Igather(const void* send, void* recv, size_t count, DataType dtype, int root,
                                const CallOptions& opt = {}) {
    return Enqueue([=](Communicator& c) { return c.Gather(send, recv, count, dtype, root, opt); });
  }
  std::shared_ptr<Work> Iscatter(const void* send, void* recv, size_t count, DataType dtype, int root,
                                 const CallOptions& opt = {}) {
    return Enqueue([=](Communicator& c) { return c.Scatter(send, recv, count, dtype, root, opt); });
  }
  std::shared_ptr<Work> Ialltoallv(const void* send, absl::Span<const size_t> send_counts,
                                   absl::Span<const size_t> send_displs, void* recv,
                                   absl::Span<const size_t> recv_counts, absl::Span<const size_t> recv_displs,
                                   DataType dtype, const CallOptions& opt = {}) {
    return Enqueue([=](Communicator& c) {
      return c.Alltoallv(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype, opt);
    });
  }
  std::shared_ptr<Work> Isend(const void* data, size_t count, DataType dtype, int peer) {
    return Enqueue([=](Communicator& c) { return c.Send(data, count, dtype, peer); });
  }
  std::shared_ptr<Work> Irecv(void* data, size_t count, DataType dtype, int peer) {
    return Enqueue([=](Communicator& c) { return c.Recv(data, count, dtype, peer); });
  }

  // --- symmetric memory (every rank on one node) ---
  // Collective: every rank calls it with the same `bytes`, in the same order as its other collectives. Returns
  // this rank's region of `bytes` (4 KiB aligned, zero-filled) in memory every rank of the communicator maps
  // (runtime/transport/symmetric_region.h). An allreduce, allgather, reducescatter or broadcast whose
  // buffers lie in such memory runs `symmetric` under "auto" (from SymmetricFromBytes): every rank reads its
  // peers' buffers and writes the outputs directly, with no data messages (runtime/algorithms/symmetric_call.h).
  // Every rank must then pass symmetric buffers (anywhere in any allocation; a rank that passes other memory
  // gets every rank an error naming it, never a wrong result). Valid until FreeSymmetric or the communicator's
  // destruction. FailedPrecondition when the ranks span several nodes; DeadlineExceeded (HCCL_CONNECT_TIMEOUT) naming a
  // rank that never called it.
  virtual absl::StatusOr<void*> AllocSymmetric(size_t bytes) = 0;
  // Unmaps the allocation that starts at `p` here (not collective: call it on every rank once no call uses it).
  virtual absl::Status FreeSymmetric(void* p) = 0;

  // Writes this rank's flight recorder of this communicator (its last HCCL_TUNE_FR_ENTRIES calls) as a JSON file
  // into HCCL_TUNE_FR_DUMP_DIR (docs/TROUBLESHOOTING.md) and returns its path. Not collective; any thread, any
  // time, also while a call runs. FailedPrecondition when the recorder or its dumps are off.
  virtual absl::StatusOr<std::string> DumpFlightRecorder() = 0;

  // Sub-communicator of the ranks that pass the same `color` (ordered by `key`, then rank). Collective over
  // this communicator. color < 0: this rank joins none and gets nullptr.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(int color, int key) = 0;
};

}  // namespace hccltune

// Symmetric memory: one allocation of the same size on every rank of a single-node group, each rank's piece
// mapped into every other rank's address space. A collective whose buffers lie in it can read its peers'
// inputs and write their outputs with plain loads and stores — no ring in between, no kernel copy, no page
// pinning (the `symmetric` allreduce, runtime/algorithms/allreduce/symmetric.cc). This is what NCCL's
// registered/symmetric buffers and PyTorch's SymmetricMemory give on GPUs, done with shared memory.
//
// Each piece is a memfd (anonymous, never named in /dev/shm, so a killed job leaves nothing behind). Its
// owner publishes (pid, fd, size, the file's device and inode) through the bootstrap store; every other rank
// opens /proc/<pid>/fd/<fd> — the kernel allows this for the same user, as it allows process_vm_readv — checks
// with fstat that it reached that very file (a rank in another pid namespace, where the pid names another
// process, is refused rather than mapping a stranger's file) and maps it. Every rank waits until all have
// mapped before Create returns; then the owner closes its descriptor (the mappings keep the memory).
//
// The caller's region is the whole piece: 4 KiB aligned, 2 MiB aligned in huge pages.
// A piece of at least `huge_from` bytes comes from the hugetlb pool (2 MiB pages, MFD_HUGETLB) when the pool
// can hold it, else from ordinary pages; each rank decides for its own piece and publishes its mapping size.
//
// Thread-safety: immutable after Create; the mapped memory itself is the caller's to synchronise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/bootstrap/store.h"
#include "runtime/transport/symmetric_region.h"

namespace hccltune {

class SymmetricMemory final : public SymmetricRegion {
 public:
  // Collective over the `size` ranks of a group that are all on this host: each calls it with the same `id`
  // and `bytes`. Keys live under `key_prefix` in `store`; waits up to `timeout` for the others (an error names
  // the ranks that never arrived). A rank that fails publishes why, so the others fail at once naming it.
  // `huge_from`: try huge pages for this rank's piece when bytes >= huge_from (SIZE_MAX: never).
  static absl::StatusOr<std::unique_ptr<SymmetricMemory>> Create(Store& store, const std::string& key_prefix,
                                                                 uint64_t id, int rank, int size, size_t bytes,
                                                                 size_t huge_from, absl::Duration timeout);
  ~SymmetricMemory() override;

 private:
  SymmetricMemory() = default;
  static absl::StatusOr<std::unique_ptr<SymmetricMemory>> Setup(Store& store, const std::string& prefix, uint64_t id,
                                                                int rank, int size, size_t bytes, size_t huge_from,
                                                                absl::Duration timeout);
  int fd_ = -1;                    // this rank's memfd, open until every rank has mapped it
  std::vector<size_t> map_bytes_;  // every rank's mapping's length
};

}  // namespace hccltune

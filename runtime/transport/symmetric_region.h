// Symmetric memory as the communicator sees it: one allocation of the same size on every rank of a group, each
// rank's piece mapped into every other rank's address space (the shm device's SymmetricMemory,
// runtime/transport/shm/symmetric_memory.h, makes them). A collective whose buffers lie in one reads its peers'
// inputs and writes their outputs with plain loads and stores (the `symmetric` allreduce).
//
// Thread-safety: a region is immutable once made (the mapped memory itself is the caller's to synchronise); an
// allocator is used by one thread at a time, as its device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace hccltune {

class SymmetricRegion {
 public:
  virtual ~SymmetricRegion() = default;
  SymmetricRegion(const SymmetricRegion&) = delete;
  SymmetricRegion& operator=(const SymmetricRegion&) = delete;

  uint64_t id() const { return id_; }
  size_t bytes() const { return bytes_; }
  // Whether this rank's own piece is in huge pages.
  bool huge() const { return huge_; }
  // Rank q's piece as mapped in this process (q = this rank: the caller's own memory).
  char* base(int q) const { return bases_[static_cast<size_t>(q)]; }
  const std::vector<char*>& bases() const { return bases_; }
  // Offset of [p, p + n) inside this rank's piece, or -1 when it is not entirely inside (no virtual call: the
  // communicator asks it on calls).
  int64_t OffsetOf(const void* p, size_t n) const {
    const char* c = static_cast<const char*>(p);
    const char* b = bases_[static_cast<size_t>(rank_)];
    if (b == nullptr || c < b || n > bytes_ || static_cast<size_t>(c - b) > bytes_ - n) return -1;
    return c - b;
  }

 protected:
  SymmetricRegion() = default;
  uint64_t id_ = 0;
  size_t bytes_ = 0;
  int rank_ = 0;
  bool huge_ = false;
  std::vector<char*> bases_;  // every rank's piece, mapped here
};

// A device's symmetric memory (Device::symmetric()).
class SymmetricAllocator {
 public:
  // Collective over every rank of the communicator: each calls it with the same `id` and `bytes`; waits for the
  // others up to HCCL_CONNECT_TIMEOUT (an error names the ranks that never arrived; a rank that fails says why,
  // so the others fail at once naming it). `huge_from`: huge pages for this rank's piece from that size
  // (SIZE_MAX: never).
  virtual absl::StatusOr<std::unique_ptr<SymmetricRegion>> AllocateSymmetric(uint64_t id, size_t bytes,
                                                                             size_t huge_from) = 0;

 protected:
  ~SymmetricAllocator() = default;
};

}  // namespace hccltune

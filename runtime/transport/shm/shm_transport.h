// Shared-memory transport between ranks on one node (the HCCS class).
//
// Each rank creates one POSIX shared-memory segment holding its doorbell and one single-producer /
// single-consumer byte ring per local peer (data flowing *into* this rank). Every local rank maps every other
// local rank's segment; once all have mapped (a barrier through the store), the names are unlinked, so a job
// killed with SIGKILL leaves nothing in /dev/shm. A writer copies into the reader's ring and rings the
// reader's doorbell only if the reader announced it is going to sleep (futex), so the fast path has no
// syscalls: spin briefly, then block.
//
// Thread-safety: a ShmDomain is set up by one thread; its pairs are driven by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/transport/pair.h"

namespace hccltune {

class ShmDomain {
 public:
  // Creates this rank's segment "/<name_prefix>-<rank>" with `ring_bytes` per inbound ring from each of
  // `local_ranks` (group ranks on this node, including `rank`).
  static absl::StatusOr<std::unique_ptr<ShmDomain>> Create(int rank, const std::vector<int>& local_ranks,
                                                           size_t ring_bytes, const std::string& name_prefix);
  ~ShmDomain();

  const std::string& segment_name() const { return name_; }
  // Maps the segment of every other local rank (rank -> segment name).
  absl::Status MapPeers(const std::map<int, std::string>& names);
  // Removes this rank's segment name (mappings stay valid). Call after every local peer mapped it.
  void Unlink();

  // The link to local peer `peer` (owned by the domain).
  Pair* pair(int peer);
  Doorbell* doorbell();
  size_t ring_bytes() const { return ring_bytes_; }

  struct Segment;

 private:
  ShmDomain() = default;
  int rank_ = 0;
  std::vector<int> local_ranks_;
  size_t ring_bytes_ = 0;
  std::string name_;
  bool unlinked_ = false;
  Segment* own_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<int, Segment*> peers_;
  std::map<int, std::unique_ptr<Pair>> pairs_;
  std::unique_ptr<Doorbell> doorbell_;
};

}  // namespace hccltune

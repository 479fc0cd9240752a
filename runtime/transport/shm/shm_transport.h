// Shared-memory transport between ranks on one node (the HCCS class).
//
// Each rank creates one POSIX shared-memory segment holding its doorbell, one single-producer /
// single-consumer byte ring per local peer (data flowing *into* this rank) and its two mailbox slots (small
// collectives' blocks, read in place by every local rank; mailbox.h). Every local rank maps every other
// local rank's segment; once all its peers have mapped it (each counts itself in its header), a rank unlinks its name,
// so a job killed with SIGKILL leaves nothing in /dev/shm. A writer copies into the reader's ring and rings the
// reader's doorbell only if the reader announced it is going to sleep (futex), so the fast path has no
// syscalls: spin briefly, then block.
//
// Single copy (cross-memory attach): messages of `single_copy_min_bytes` to `single_copy_max_bytes` travel as an
// address in the ring (the endpoint uses it only for non-reducing collectives, see stream_endpoint.cc); the reader
// copies them with process_vm_readv straight from the writer's buffer into their destination and acknowledges through a
// counter in the ring's control block (see Pair). At MapPeers each rank probes, per peer, that the kernel lets it read
// that peer (same user, Yama ptrace_scope, dumpable, same pid namespace: it reads the peer segment's header at the
// peer's own address and compares) and publishes the result in the control block of the ring the peer writes into; a
// peer whose read is refused keeps the two-copy ring, and SingleCopyStatus() says why. Messages of 64 KiB and more
// are shared (SingleCopyLink::RequestPeerWrite): the reader asks the writer, which only waits for the acknowledgement,
// to write the front half into the reader's buffer with process_vm_writev while it reads the back half; the front half
// goes to whichever side claims it first (a compare-and-swap on a word in the same control block), so a busy writer
// costs the reader nothing, and a failed write (the reader died, the kernel refused) falls back to the reader; each
// segment records the CPU its owner is bound to, and two ranks bound to the same CPU do not share
// (SingleCopyLink::SharesCpuWithPeer: they never copy at once). With Yama ptrace_scope 1 every
// rank declares "any process may attach" (PR_SET_PTRACER_ANY), as Open MPI's vader does; scope 2 or 3 refuses single
// copy.
//
// Thread-safety: a ShmDomain is set up by one thread; its pairs are driven by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/mailbox_block.h"
#include "runtime/transport/mailbox.h"
#include "runtime/transport/pair.h"

namespace hccltune {

struct ShmOptions {
  bool single_copy = true;  // HCCL_TUNE_SINGLE_COPY=off turns it off
  // Smaller messages stream through the ring. 8 KiB: a 2-rank broadcast of 8-32 KiB took 1.6-2.6 us single-copied
  // against 3.3-9.3 us through the ring, an allgather of 16-64 KiB 2.5-4.5 against 3.6-10.5 us; an allgather's
  // 2-4 KiB messages were faster through the ring (on an Intel VM with memcpy at ~6 GB/s). The
  // communicator sets it from what a process_vm_readv costs on the machine (cma_cost.h) or from
  // HCCL_TUNE_SINGLE_COPY=<size>.
  size_t single_copy_min_bytes = 8u << 10;
  size_t single_copy_max_bytes = SIZE_MAX;  // no upper limit (tests narrow the window)
  // Whether Create maps, write-faults and zeroes this rank's inbound rings, and MapPeer write-faults the ring this
  // rank writes in each peer's segment, at init (warm first calls); else their pages fault in on first use. The
  // device turns it off when the node's ranks outnumber its CPUs: then the ranks populate their rings one CPU
  // after another, the node's whole shm (16 MiB x ranks) is paged in serially, and that dominated init (32 ranks
  // on 2 CPUs: about 1 s of 1.5). Either way Create reserves every page (posix_fallocate).
  bool populate_rings = true;
};

// Bytes of one mailbox slot (two per rank): room for the endpoint's slot header and a block of up to
// kMailboxBlockBytes (runtime/common/sizes.h).
inline constexpr size_t kMailboxSlotHeaderBytes = 64;
inline constexpr size_t kMailboxSlotBytes = kMailboxBlockBytes + kMailboxSlotHeaderBytes;

// Removes the segments ("hccltune-<pid>-...") in `dir` (the POSIX shared-memory directory) that a process left
// behind when it was killed during setup — a segment is unlinked as soon as every local rank has mapped it, so
// only an interrupted setup leaves one: this user's, whose creating pid no longer exists, untouched for at least
// `min_age` (a live job in another PID namespace sharing /dev/shm is never that old). Called by ShmDomain::Create;
// returns how many were removed. Thread-safety: any thread (races with another remover are harmless).
int RemoveOrphanedSegments(absl::Duration min_age, const std::string& dir = "/dev/shm");

class ShmDomain {
 public:
  // Creates this rank's segment "/<name_prefix>-<rank>" with `ring_bytes` per inbound ring from each of
  // `local_ranks` (group ranks on this node, including `rank`).
  static absl::StatusOr<std::unique_ptr<ShmDomain>> Create(int rank, const std::vector<int>& local_ranks,
                                                           size_t ring_bytes, const std::string& name_prefix,
                                                           const ShmOptions& options = {});
  ~ShmDomain();

  const std::string& segment_name() const { return name_; }
  // Maps the segment of every other local rank (rank -> segment name); MapPeer for each.
  absl::Status MapPeers(const std::map<int, std::string>& names);
  // Maps local rank `peer`'s segment `name` (once; again is a no-op). Unavailable while its owner has not finished
  // creating it (absent, not sized yet, or its magic not yet stored), so a caller may retry without any other
  // signal that it is ready; FailedPrecondition when it does not match this rank's layout.
  absl::Status MapPeer(int peer, const std::string& name);
  // Whether this rank reads `peer`'s large messages by single copy (probed in MapPeers): OK, or why not
  // (turned off, refused by the kernel, Yama). Informational: the wire protocol works either way.
  absl::Status SingleCopyStatus(int peer) const;
  // How many local peers have mapped this rank's segment so far (each counts itself there in MapPeers).
  uint32_t MappedBy() const;
  // Removes this rank's segment name (mappings stay valid). Call after every local peer mapped it.
  void Unlink();

  // The link to local peer `peer` (owned by the domain).
  Pair* pair(int peer);
  Doorbell* doorbell();
  // The local ranks' mailbox (runtime/transport/mailbox.h): two slots at the end of every segment. Null before
  // MapPeers has mapped every local rank. Owned by the domain.
  Mailbox* mailbox();
  size_t ring_bytes() const { return ring_bytes_; }

  struct Segment;

 private:
  ShmDomain() = default;
  // Opens and maps `name` when its owner has finished it (MapPeer's Unavailable otherwise) and checks its layout.
  absl::StatusOr<Segment*> OpenReady(int peer, const std::string& name) const;
  static absl::Status LayoutMismatch(int peer, const std::string& name);
  int rank_ = 0;
  std::vector<int> local_ranks_;
  size_t ring_bytes_ = 0;
  std::string name_;
  bool unlinked_ = false;
  Segment* own_ = nullptr;
  size_t map_bytes_ = 0;
  std::map<int, Segment*> peers_;
  std::map<int, std::unique_ptr<Pair>> pairs_;
  ShmOptions options_;
  std::string single_copy_off_;  // why single copy is off for every peer ("" when it may be used)
  std::map<int, absl::Status> single_copy_;
  std::unique_ptr<Doorbell> doorbell_;
  std::unique_ptr<Mailbox> mailbox_;
};

}  // namespace hccltune

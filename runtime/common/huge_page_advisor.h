// Transparent huge pages for the caller's own buffers (HCCL_TUNE_THP, docs/ENVIRONMENT.md).
//
// A large collective on ordinary (malloc'd) buffers streams through every 4 KiB page of its input and output:
// a TLB miss per page for the copies and reductions, and a page-by-page pin for every single-copy kernel copy
// (process_vm_readv) a peer makes of it. A buffer that comes back call after call — DDP's gradient buckets, a
// benchmark's buffers — is therefore worth moving into 2 MiB transparent huge pages once: madvise(MADV_COLLAPSE)
// (Linux 6.1) does it synchronously, in place. The contents, the addresses and the mapping's kind (private,
// anonymous) stay as they were; the program sees no difference but speed. Only the whole 2 MiB pages inside
// the buffer are collapsed, so memory around the buffer (other objects on its edge pages) is never touched.
//
// When: at the second use of the same extent — a buffer used once (a fresh tensor per call) never pays for a
// collapse it would not win back — and once per extent (a bounded, first-in-first-out record of the last
// kRemembered extents). Never when the system's THP setting is "never"; the kernel itself refuses mappings the
// program marked MADV_NOHUGEPAGE or a process with THP disabled by prctl, pages pinned by a device, and
// file-backed or shared memory — a refusal is recorded like a collapse and not retried. A collapse costs about
// one copy of the buffer (64 MiB: ~10 ms), once.
//
// Thread-safety: thread-safe (one process-wide record behind a mutex; communicators share it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace hccltune {

class HugePageAdvisor {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kRemembered = 256;

  enum class Outcome : uint8_t {
    kNoWholePage,  // no whole, aligned 2 MiB page inside the buffer
    kFirstUse,     // noted; collapsed if it comes back
    kCollapsed,    // collapsed now
    kRefused,      // the kernel declined now (recorded; not retried)
    kDone,         // collapsed or refused before
    kDisabled,     // THP is "never" on this system
  };

  // The process-wide advisor (reads /sys/kernel/mm/transparent_hugepage/enabled once).
  static HugePageAdvisor& Process();

  // `thp_never`: behave as on a system whose THP setting is "never" (nothing is collapsed).
  explicit HugePageAdvisor(bool thp_never) : never_(thp_never) {}

  // A collective is about to use [p, p + bytes) (null or empty: nothing happens). Collapses the buffer's whole
  // 2 MiB pages at its second use.
  Outcome Use(const void* p, size_t bytes);

 private:
  using Extent = std::pair<uintptr_t, uintptr_t>;  // [begin, end) of the whole 2 MiB pages
  enum class State : uint8_t { kSeen, kDone };

  const bool never_;
  absl::Mutex mu_;
  std::map<Extent, State> seen_ ABSL_GUARDED_BY(mu_);
  std::deque<Extent> order_ ABSL_GUARDED_BY(mu_);  // insertion order, for forgetting the oldest
};

}  // namespace hccltune

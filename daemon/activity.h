// ActivityTracker: which tuning clients reported live timings recently — the "is a job running on this node?"
// half of the sweep's busy check (GetActivity). ReportTimings notes every batch; a sweep asks for the reporters
// seen within a window. Memory is bounded: at most kMaxClients clients are remembered (the least recently seen
// is forgotten first) and clients silent for longer than kForget are dropped.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace hccltune::daemon {

class ActivityTracker {
 public:
  static constexpr size_t kMaxClients = 4096;
  static constexpr absl::Duration kForget = absl::Minutes(10);

  struct Reporter {
    std::string client_id;
    std::string fingerprint;
    uint64_t samples = 0;  // within the window asked for (counted per second)
    absl::Time last_seen;
  };

  // One batch of `samples` samples from `client_id` for topology `fingerprint`, received at `now`.
  void Note(const std::string& client_id, const std::string& fingerprint, uint64_t samples,
            absl::Time now = absl::Now());
  // Clients seen within `window` before `now`, most recent first.
  std::vector<Reporter> Recent(absl::Duration window, absl::Time now = absl::Now());

 private:
  struct Client {
    std::string fingerprint;
    absl::Time last_seen;
    // Samples per whole second of the last minutes: (unix second, count), oldest first, at most 600 slots.
    std::vector<std::pair<int64_t, uint64_t>> per_second;
  };
  void Prune(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Client> clients_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hccltune::daemon

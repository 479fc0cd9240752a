// MiniSweeper: the online policy's other re-measure path: a stale entry of a single-node topology is
// re-measured by a local mini-sweep when the node is idle, and the winners for its range are merged into the
// topology's current table.
//
//   - Which entries: those marked stale (daemon/online_policy.h) in the latest table of a topology whose
//     fingerprint JSON says "nodes":1 (docs/CONVENTIONS.md, Topology fingerprint). Entries whose range holds
//     no power of two (the sweep measures powers of two) are skipped with one log line.
//   - When: the node is idle — no tuning client reported live timings for `idle_s` seconds (ActivityTracker;
//     also not within `idle_s` of the daemon's start, when a running job may not have reported yet) and no sweep
//     runs (SweepRunner, nor a sweep started by hand whose journal row in this daemon's database is marked
//     running, started within 6 h) — and fewer than `max_per_hour` mini-sweeps started within the last hour (cancelled
//     and failed ones count: they loaded the node too). One at a time.
//   - How: the daemon's ordinary sweep child (SweepRunner) limited to the entry's collective, dtype, world size
//     (= ranks) and byte range: `hccl-tune sweep --coll C --dtype D --ranks N --range LO-HI --no-table --force`.
//     --force skips the sweep's own busy check (load average and reporters within 30 s): the idle rule above is
//     the mini-sweep's. --no-table: the child only reports its winners (its `done` event).
//   - Merge: read the topology's latest table, replace exactly the stale entry with the winners clipped to its
//     range (other entries untouched), publish as one new version with a compare-and-swap on the version read;
//     if the table changed meanwhile, merge into the newer one (re-read, retry). When the newer table no longer
//     holds that entry stale (a sweep or a decision re-measured it), the result is dropped. The new entries are
//     not stale and carry the sweep's per-rank median (rank_time_us) as the online policy's new baseline. A
//     child that measured another topology (its `done` event names the fingerprint) is dropped too.
//   - A job that starts reporting while a mini-sweep runs cancels it (SIGINT to the child's process group, so it
//     stops disturbing the job); the entry stays stale and is tried again once the node is idle again.
//   - An entry whose mini-sweep failed (or could not start) or whose result was dropped is not tried again for
//     15 min, doubled per further failure in a row up to 24 h (logged with the event); meanwhile the next stale
//     entry is taken, so one entry that always fails cannot use up the hourly budget. A merge clears it.
//
// Thread-safety: Tick() from one thread at a time (the background thread, or a test); Start/Stop from the owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/activity.h"
#include "daemon/periodic_worker.h"
#include "daemon/sweep_runner.h"
#include "db/tuning_store.h"

namespace hccltune::daemon {

struct MiniSweepOptions {
  bool enabled = true;    // mini_sweep = on|off
  int idle_s = 120;       // mini_sweep_idle_s: no live timings for this long = the node is idle
  int max_per_hour = 4;   // mini_sweep_max_per_hour: mini-sweeps started within any hour
  int interval_ms = 250;  // how often the daemon looks (not in the config file)
};
absl::Status ValidateMiniSweepOptions(const MiniSweepOptions& o);

// The entries of `current` with `key`'s entry replaced by `fresh` clipped to its range. FailedPrecondition when
// `current` holds no entry with exactly that key or it is no longer stale (re-measured meanwhile);
// InvalidArgument when `fresh` (entries of the key's collective, dtype and world size) does not cover the range
// without gaps. Pure.
absl::StatusOr<std::vector<db::TunedEntry>> MergeRange(const std::vector<db::TunedEntry>& current,
                                                       const db::EntryKey& key,
                                                       const std::vector<db::TunedEntry>& fresh);

// The winners and topology of a sweep child's `done` event (`hccl-tune sweep --json`). InvalidArgument naming
// what is missing.
struct SweepResult {
  std::string fingerprint;
  std::vector<db::TunedEntry> entries;
};
absl::StatusOr<SweepResult> ParseSweepResult(const std::string& done_json);

// Whether a topology's canonical JSON describes one node.
bool IsSingleNode(const std::string& topology_json);

// What a tick did (returned for tests, logged at info).
struct MiniSweepEvent {
  enum class Kind : uint8_t { kNone, kStarted, kCancelled, kMerged, kDropped, kFailed };
  Kind kind = Kind::kNone;
  std::string sweep_id;
  std::string fingerprint;
  db::EntryKey key;
  std::string message;
  int64_t version = 0;  // kMerged: the version published
};

class MiniSweeper {
 public:
  // Same contract as OnlinePolicy::Publisher: a compare-and-swap publish through the handlers.
  using Publisher = std::function<absl::StatusOr<int64_t>(const db::Topology&, const std::vector<db::TunedEntry>&,
                                                          int64_t expected_version)>;
  // Everything must outlive the sweeper.
  MiniSweeper(db::TuningStore* store, Publisher publish, SweepRunner* sweeps, ActivityTracker* activity,
              MiniSweepOptions options, absl::Time started = absl::Now());
  ~MiniSweeper();
  MiniSweeper(const MiniSweeper&) = delete;
  MiniSweeper& operator=(const MiniSweeper&) = delete;

  // One look: follow the running mini-sweep (cancel it when a job reports, merge its result when done), or start
  // one when the node is idle and a stale single-node entry waits.
  MiniSweepEvent Tick(absl::Time now = absl::Now());

  void Start();  // background Tick every interval_ms (no-op when disabled)
  void Stop();   // joins; a running mini-sweep is left to SweepRunner::Shutdown

  std::string running_id() const;

 private:
  struct Running {
    std::string id;
    std::string fingerprint;
    db::EntryKey key;
    absl::Time started;
    bool cancelling = false;
  };
  struct Backoff {
    int failures = 0;
    absl::Time until;  // the entry is not mini-swept again before this
  };
  MiniSweepEvent Follow(absl::Time now);
  MiniSweepEvent MaybeStart(absl::Time now);
  MiniSweepEvent Merge(const Running& r, const std::string& done_json);
  // Records a failed or dropped mini-sweep of `fp`'s entry `key`; returns what to add to the event's message.
  std::string BackOff(const std::string& fp, const db::EntryKey& key, absl::Time now);

  db::TuningStore* const store_;
  const Publisher publish_;
  SweepRunner* const sweeps_;
  ActivityTracker* const activity_;
  const MiniSweepOptions options_;
  const absl::Time started_;

  std::optional<Running> running_;          // Tick() only
  std::deque<absl::Time> starts_;           // Tick() only: start times within the last hour
  std::set<std::string> skipped_;           // Tick() only: unmeasurable entries already logged
  std::map<std::string, Backoff> backoff_;  // Tick() only: by "fingerprint entry", entries whose sweep failed
  mutable absl::Mutex mu_;
  std::string running_id_ ABSL_GUARDED_BY(mu_);
  PeriodicWorker worker_;  // last member: stopped before the state it uses goes away
};

}  // namespace hccltune::daemon

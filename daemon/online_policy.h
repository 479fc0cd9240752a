// OnlinePolicy: the daemon's side of tuning at training time. It watches the live timings that
// running jobs report, compares them with the sweep baseline of the table entry that chose the configuration,
// and re-tunes a running job through the table versions the job already follows:
//
//   1. Regression. For each entry of a topology's latest table it keeps a window of the most recent live
//      samples per configuration. When the window of the entry's winner holds at least `min_samples` samples
//      and their median exceeds `regression_ratio` x the baseline (the entry's rank_time_us, the sweep's
//      per-rank median; time_us when that is not recorded) and the baseline + `min_regression_us`, the
//      regression is sustained.
//   2. Exploration plan. The entry is marked stale and a new table version is published that carries a plan:
//      "of the calls this entry decides, one in `explore_every` runs candidate X, at most `explore_calls`
//      times". X is the entry's runner-up, and only when its swept time is at most `explore_max_ratio` x the
//      winner's (never a configuration measured far slower). Without such a candidate the entry is only
//      marked stale (and logged). Every rank of the job switches to that version at the same operation and
//      executes the plan identically (runtime/selector/selector.h, ChooseForCall).
//   3. Decision. When the candidate's window and the winner's window both hold `explore_min_samples`
//      samples, taken during the same period, the faster median wins: a new version either makes X the winner
//      (runner-up: the old winner; baseline: X's live median) or keeps the winner with its live median as the
//      new baseline. Either way the plan and the stale mark are cleared. Only reports of tuners (Role::kTuner:
//      root, the daemon's user, the tuner group) may install X: when either window holds a sample a reader
//      reported, a faster X is "unconfirmed" instead — the plan is cleared, the winner stays and the entry stays
//      stale, so a mini-sweep (5.) or a tuner's sweep measures the two itself. A reader's reports can thus start
//      the bounded exploration of 2. but never install a winner that they alone favour. A plan whose samples do not
//      arrive within `explore_timeout_s` is withdrawn (the entry stays stale, baseline = the winner's live median when
//      known).
//   4. Cool-down. After a decision (switch, unconfirmed or keep) the entry is not judged again for `cooldown_s`
//   seconds, so
//      a close runner-up cannot flip the winner back and forth; samples keep arriving in its window meanwhile.
//   5. A stale entry of a single-node topology is re-measured by a local mini-sweep once the node is idle
//      (daemon/mini_sweep.h). When an entry's measurement changes under the policy (its sweep id or time — a
//      mini-sweep, a sweep, an import), the policy drops that entry's windows: they measured the old one.
//
// Live windows and cool-downs are in memory: a restarted daemon starts from empty windows. A publish is a
// compare-and-swap on the version the evaluation read (db::PutOptions::expected_version): a table written by
// someone else in between (a sweep, an import, a mini-sweep) is never overwritten; the entry is judged again
// on the newer table at the next evaluation.
//
// Thread-safety: Observe() from any thread (cheap: appends to a bounded queue, drops and counts beyond it);
// Evaluate() from one thread at a time (the background thread, or a test); Start/Stop from the owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/peer_auth.h"
#include "daemon/periodic_worker.h"
#include "db/tuning_store.h"

namespace hccltune::daemon {

struct OnlinePolicyOptions {
  bool enabled = true;             // online_policy = on|off
  double regression_ratio = 1.2;   // live median > ratio x baseline is a regression
  int min_samples = 64;            // samples of the winner before a regression is judged
  int window = 256;                // most recent samples kept per (entry, configuration)
  int explore_every = 8;           // one call in N explores (a share of 1/N)
  int explore_calls = 256;         // at most M exploring calls per rank and table version
  double explore_max_ratio = 2.0;  // never explore a candidate swept slower than this x the winner
  int explore_min_samples = 16;    // samples of candidate and winner (all ranks) before deciding
  int interval_ms = 500;           // evaluation period
  int explore_timeout_s = 300;     // a plan without enough samples by then is withdrawn
  size_t max_pending = 1 << 18;    // samples queued between evaluations (beyond: dropped, counted)
  int cooldown_s = 60;             // after a switch/keep decision the entry is not judged for this long
  // A regression must also be this many microseconds above the baseline (0 = the ratio alone). A live call's
  // time includes its wait for the last rank to arrive, which a barrier-aligned sweep excludes: small calls in a
  // tight loop run several times their swept time per rank (8 B: ~3.2 us live against 0.69 us swept), which the
  // ratio alone reads as a regression. 10 us is above that skew and far below any delay worth re-tuning for.
  double min_regression_us = 10;
};
// Checks ranges; the error names the option.
absl::Status ValidateOnlinePolicyOptions(const OnlinePolicyOptions& o);

// What an evaluation did to one entry (returned for tests and logged at info).
struct PolicyAction {
  // kBaseline: a predicted entry (model_version > 0) got its first live measurement as its baseline.
  enum class Kind : uint8_t { kExplore, kStaleNoCandidate, kSwitch, kUnconfirmed, kKeep, kWithdraw, kBaseline };
  Kind kind;
  std::string fingerprint;
  db::EntryKey key;
  std::string winner;     // the entry's winner before the action
  std::string candidate;  // explored / new winner (kExplore, kSwitch, kKeep)
  double winner_live_us = 0, candidate_live_us = 0, baseline_us = 0;
  int64_t version = 0;  // the version published (0 = none)
};
absl::string_view PolicyActionName(PolicyAction::Kind k);

class OnlinePolicy {
 public:
  // Stores `entries` as the topology's new table version if its latest version is still `expected_version`
  // (else Aborted); returns the version. The daemon wires this to TunerHandlers::Publish so caches and
  // WatchTable streams see the change.
  using Publisher = std::function<absl::StatusOr<int64_t>(const db::Topology&, const std::vector<db::TunedEntry>&,
                                                          int64_t expected_version)>;

  // `store` must outlive the policy.
  OnlinePolicy(db::TuningStore* store, Publisher publish, OnlinePolicyOptions options);
  ~OnlinePolicy();
  OnlinePolicy(const OnlinePolicy&) = delete;
  OnlinePolicy& operator=(const OnlinePolicy&) = delete;

  // Live samples of a topology (canonical configuration strings), as accepted by ReportTimings from a caller of
  // role `reporter`. Samples over max_pending or without a positive, finite duration are dropped (counted in
  // dropped()).
  void Observe(const std::string& fingerprint, absl::Span<const db::LiveSample> samples, Role reporter);
  // Takes the queued samples into the windows and judges every entry that has samples; returns what it did.
  absl::StatusOr<std::vector<PolicyAction>> Evaluate(absl::Time now = absl::Now());

  // Background evaluation every interval_ms (no-op when disabled).
  void Start();
  void Stop();

  uint64_t dropped() const { return dropped_.load(); }
  // Decisions published so far, per kind (PolicyActionName), every kind listed.
  std::vector<std::pair<std::string, uint64_t>> ActionCounts() const;
  uint64_t versions_published() const { return published_.load(); }
  // Publishes refused because the table changed between read and write (judged again next time).
  uint64_t publish_conflicts() const { return conflicts_.load(); }

 private:
  struct Window {
    std::deque<double> us;       // most recent last
    std::deque<bool> by_reader;  // per sample of `us`: reported by a reader (not a tuner)
    bool AnyReader() const;
  };
  struct Pending {
    db::LiveSample sample;
    Role reporter;
  };
  struct EntryState {
    std::map<std::string, Window> by_config;
    absl::Time plan_seen = absl::InfinitePast();  // when this daemon first saw the entry's current plan
    absl::Time cooldown_until = absl::InfinitePast();
    std::string measurement;  // the entry's sweep id and time when its windows started
  };
  struct TopologyState {
    std::map<std::string, EntryState> entries;  // by KeyId(entry key)
  };

  static std::string KeyId(const db::EntryKey& k);
  void Add(EntryState& st, const std::string& config, double us, Role reporter);
  // Judges one entry; fills `out` (a replacement entry) and returns the action when the entry changes.
  std::optional<PolicyAction> Judge(const std::string& fp, const db::TunedEntry& e, EntryState& st, absl::Time now,
                                    db::TunedEntry* out);

  db::TuningStore* const store_;
  const Publisher publish_;
  const OnlinePolicyOptions options_;

  absl::Mutex mu_;
  std::map<std::string, std::vector<Pending>> pending_ ABSL_GUARDED_BY(mu_);
  size_t pending_count_ ABSL_GUARDED_BY(mu_) = 0;

  std::map<std::string, TopologyState> state_;  // Evaluate() only
  std::atomic<uint64_t> dropped_{0}, published_{0}, conflicts_{0};
  static constexpr int kKinds = 7;  // PolicyAction::Kind values
  std::atomic<uint64_t> by_kind_[kKinds] = {};
  PeriodicWorker worker_;  // last member: stopped before the state it uses goes away
};

}  // namespace hccltune::daemon

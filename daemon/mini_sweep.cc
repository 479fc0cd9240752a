#include "daemon/mini_sweep.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "db/table_json.h"
#include "nlohmann/json.hpp"
#include "runtime/common/json_field.h"
#include "runtime/common/logging.h"
#include "runtime/common/peer_configuration.h"

namespace hccltune::daemon {
namespace {

constexpr int kMergeAttempts = 5;
// An entry whose mini-sweep failed or was dropped waits kBackoffBase, doubled per further failure up to
// kBackoffMax, while other stale entries go first: one entry that always fails cannot use up the hourly budget.
constexpr absl::Duration kBackoffBase = absl::Minutes(15);
constexpr absl::Duration kBackoffMax = absl::Hours(24);
// An open-ended range is measured from its lower end up to this many times it (a full sweep's default upper
// end, 64 MiB, bounds it; a larger lower end is measured alone).
constexpr uint64_t kOpenRangeFactor = 8;
constexpr uint64_t kOpenRangeMax = 64ull << 20;

std::string Describe(const db::EntryKey& k) {
  return absl::StrCat(CollectiveName(k.collective), "/", DataTypeName(k.dtype), " world ", k.world_size, " ",
                      FormatByteRange(k.range));
}

bool SameGroup(const db::EntryKey& a, const db::EntryKey& b) {
  return a.collective == b.collective && a.dtype == b.dtype && a.world_size == b.world_size;
}

// The smallest power of two >= max(lo, 1) (0 when there is none below 2^63).
uint64_t FirstPowerOfTwo(uint64_t lo) {
  uint64_t b = 1;
  while (b < lo && b < (1ull << 63)) b *= 2;
  return b >= lo ? b : 0;
}

}  // namespace

absl::Status ValidateMiniSweepOptions(const MiniSweepOptions& o) {
  if (o.idle_s < 1 || o.idle_s > 86400) {
    return absl::InvalidArgumentError(absl::StrCat("mini_sweep_idle_s = ", o.idle_s, ": expected 1 to 86400"));
  }
  if (o.max_per_hour < 1 || o.max_per_hour > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("mini_sweep_max_per_hour = ", o.max_per_hour, ": expected 1 to 3600 (mini_sweep = off disables)"));
  }
  if (o.interval_ms < 10) return absl::InvalidArgumentError("mini-sweep interval below 10 ms");
  return absl::OkStatus();
}

bool IsSingleNode(const std::string& topology_json) {
  auto j = nlohmann::json::parse(topology_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return false;
  auto it = j.find("nodes");
  return it != j.end() && it->is_number_integer() && it->get<int64_t>() == 1;
}

absl::StatusOr<std::vector<db::TunedEntry>> MergeRange(const std::vector<db::TunedEntry>& current,
                                                       const db::EntryKey& key,
                                                       const std::vector<db::TunedEntry>& fresh) {
  auto at = std::find_if(current.begin(), current.end(), [&](const db::TunedEntry& e) { return e.key == key; });
  if (at == current.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the table no longer has the entry ", Describe(key), " (re-measured meanwhile)"));
  }
  if (!at->stale) {
    return absl::FailedPreconditionError(
        absl::StrCat("the entry ", Describe(key), " is no longer stale (re-measured or re-judged meanwhile)"));
  }
  std::vector<db::TunedEntry> clipped;
  for (const db::TunedEntry& f : fresh) {
    if (!SameGroup(f.key, key) || f.key.range.max <= key.range.min || f.key.range.min >= key.range.max) continue;
    db::TunedEntry e = f;
    e.key.range.min = std::max(f.key.range.min, key.range.min);
    e.key.range.max = std::min(f.key.range.max, key.range.max);
    e.stale = false;
    e.explore.clear();
    e.explore_every = 0;
    e.explore_calls = 0;
    clipped.push_back(std::move(e));
  }
  std::sort(clipped.begin(), clipped.end(),
            [](const db::TunedEntry& a, const db::TunedEntry& b) { return a.key.range.min < b.key.range.min; });
  uint64_t next = key.range.min;
  for (const db::TunedEntry& e : clipped) {
    if (e.key.range.min != next) break;
    next = e.key.range.max;
  }
  if (clipped.empty() || next != key.range.max) {
    return absl::InvalidArgumentError(absl::StrCat("the mini-sweep's winners do not cover ", Describe(key),
                                                   clipped.empty() ? " at all" : absl::StrCat(" (up to ", next, ")")));
  }
  std::vector<db::TunedEntry> out(current.begin(), at);
  out.insert(out.end(), clipped.begin(), clipped.end());
  out.insert(out.end(), at + 1, current.end());
  return out;
}

absl::StatusOr<SweepResult> ParseSweepResult(const std::string& done_json) {
  auto j = nlohmann::json::parse(done_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || JsonOr(j, "event", "") != "done") {
    return absl::InvalidArgumentError("the sweep's result is not its JSON done event");
  }
  SweepResult r;
  auto topo = j.find("topology");
  auto entries = j.find("entries");
  if (topo == j.end() || !topo->is_string()) return absl::InvalidArgumentError("the sweep's result has no topology");
  if (entries == j.end() || !entries->is_array())
    return absl::InvalidArgumentError("the sweep's result has no entries");
  r.fingerprint = topo->get<std::string>();
  for (size_t i = 0; i < entries->size(); ++i) {
    auto e = db::EntryFromJsonText((*entries)[i].dump(), absl::StrCat("the sweep's entries[", i, "]"));
    if (!e.ok()) return e.status();
    r.entries.push_back(*std::move(e));
  }
  return r;
}

MiniSweeper::MiniSweeper(db::TuningStore* store, Publisher publish, SweepRunner* sweeps, ActivityTracker* activity,
                         MiniSweepOptions options, absl::Time started)
    : store_(store),
      publish_(std::move(publish)),
      sweeps_(sweeps),
      activity_(activity),
      options_(options),
      started_(started) {}

MiniSweeper::~MiniSweeper() { Stop(); }

std::string MiniSweeper::running_id() const {
  absl::MutexLock lock(&mu_);
  return running_id_;
}

MiniSweepEvent MiniSweeper::Tick(absl::Time now) {
  if (!options_.enabled) return {};
  return running_ ? Follow(now) : MaybeStart(now);
}

MiniSweepEvent MiniSweeper::Follow(absl::Time now) {
  Running& r = *running_;
  MiniSweepEvent ev{MiniSweepEvent::Kind::kNone, r.id, r.fingerprint, r.key, "", 0};
  v1::SweepProgress p;
  uint64_t seq = 0;
  absl::StatusOr<bool> w = sweeps_->Wait(r.id, &seq, absl::ZeroDuration(), &p);
  const bool known = w.ok() && *w;
  const bool final = known && (p.state() == v1::SweepProgress::DONE || p.state() == v1::SweepProgress::FAILED ||
                               p.state() == v1::SweepProgress::CANCELLED);
  if (known && !final) {
    if (r.cancelling) return ev;
    auto reporters = activity_->Recent(now - r.started, now);
    if (reporters.empty()) return ev;
    r.cancelling = true;
    auto c = sweeps_->Cancel(r.id);
    ev.kind = MiniSweepEvent::Kind::kCancelled;
    ev.message = absl::StrCat("a job started reporting (client ", reporters.front().client_id, ", topology ",
                              reporters.front().fingerprint, "): mini-sweep cancelled, retried when idle again",
                              c.ok() ? "" : absl::StrCat(" (cancel: ", c.status().message(), ")"));
    Log(LogLevel::kInfo, "mini-sweep ", r.id, " of ", r.fingerprint, " ", Describe(r.key), ": ", ev.message);
    return ev;
  }
  if (!known) {
    ev.kind = MiniSweepEvent::Kind::kFailed;
    ev.message = "the sweep runner no longer knows it";
  } else if (p.state() == v1::SweepProgress::DONE) {
    ev = Merge(r, p.result_json());
  } else if (p.state() == v1::SweepProgress::CANCELLED) {
    ev.message = "stopped";  // kNone: the cancel was reported when it was asked for (or someone else cancelled)
  } else {
    ev.kind = MiniSweepEvent::Kind::kFailed;
    ev.message = p.message();
  }
  if (ev.kind == MiniSweepEvent::Kind::kFailed || ev.kind == MiniSweepEvent::Kind::kDropped) {
    absl::StrAppend(&ev.message, BackOff(r.fingerprint, r.key, now));
  } else if (ev.kind == MiniSweepEvent::Kind::kMerged) {
    backoff_.erase(absl::StrCat(r.fingerprint, " ", Describe(r.key)));
  }
  const LogLevel level = ev.kind == MiniSweepEvent::Kind::kFailed ? LogLevel::kWarn : LogLevel::kInfo;
  Log(level, "mini-sweep ", r.id, " of ", r.fingerprint, " ", Describe(r.key), ": ", ev.message);
  running_.reset();
  absl::MutexLock lock(&mu_);
  running_id_.clear();
  return ev;
}

std::string MiniSweeper::BackOff(const std::string& fp, const db::EntryKey& key, absl::Time now) {
  Backoff& b = backoff_[absl::StrCat(fp, " ", Describe(key))];
  ++b.failures;
  absl::Duration wait = kBackoffBase;
  for (int i = 1; i < b.failures && wait < kBackoffMax; ++i) wait *= 2;
  wait = std::min(wait, kBackoffMax);
  b.until = now + wait;
  return absl::StrCat("; this entry is not mini-swept again for ", absl::FormatDuration(wait), " (",
                      b.failures == 1 ? "first failure" : absl::StrCat(b.failures, " failures in a row"),
                      "), other stale entries go first");
}

MiniSweepEvent MiniSweeper::Merge(const Running& r, const std::string& done_json) {
  MiniSweepEvent ev{MiniSweepEvent::Kind::kFailed, r.id, r.fingerprint, r.key, "", 0};
  auto result = ParseSweepResult(done_json);
  if (!result.ok()) {
    ev.message = std::string(result.status().message());
    return ev;
  }
  if (result->fingerprint != r.fingerprint) {
    ev.kind = MiniSweepEvent::Kind::kDropped;
    ev.message = absl::StrCat("result dropped: the sweep's ranks have topology ", result->fingerprint,
                              ", not the stale entry's ", r.fingerprint);
    return ev;
  }
  for (int attempt = 0; attempt < kMergeAttempts; ++attempt) {
    auto table = store_->GetTable(r.fingerprint, 0);
    if (!table.ok()) {
      ev.kind = absl::IsNotFound(table.status()) ? MiniSweepEvent::Kind::kDropped : MiniSweepEvent::Kind::kFailed;
      ev.message = absl::StrCat("result dropped: ", table.status().message());
      return ev;
    }
    auto merged = MergeRange(table->entries, r.key, result->entries);
    if (!merged.ok()) {
      ev.kind =
          absl::IsFailedPrecondition(merged.status()) ? MiniSweepEvent::Kind::kDropped : MiniSweepEvent::Kind::kFailed;
      ev.message = absl::StrCat("result dropped: ", merged.status().message());
      return ev;
    }
    auto version = publish_(table->topology, *merged, table->version);
    if (absl::IsAborted(version.status())) continue;  // changed meanwhile: merge into the newer one
    if (!version.ok()) {
      ev.message = absl::StrCat("publishing: ", version.status().message());
      return ev;
    }
    std::string winners;
    for (const db::TunedEntry& e : *merged) {
      if (SameGroup(e.key, r.key) && e.key.range.min >= r.key.range.min && e.key.range.max <= r.key.range.max) {
        absl::StrAppend(&winners, winners.empty() ? "" : ", ", FormatByteRange(e.key.range), " ", e.configuration, " (",
                        e.rank_time_us, " us per rank)");
      }
    }
    ev.kind = MiniSweepEvent::Kind::kMerged;
    ev.version = *version;
    ev.message = absl::StrCat("merged into version ", *version, " (from version ", table->version, "): ", winners);
    return ev;
  }
  ev.message = absl::StrCat("the table changed during each of ", kMergeAttempts, " merge attempts");
  return ev;
}

MiniSweepEvent MiniSweeper::MaybeStart(absl::Time now) {
  while (!starts_.empty() && now - starts_.front() >= absl::Hours(1)) starts_.pop_front();
  const absl::Duration idle = absl::Seconds(options_.idle_s);
  if (starts_.size() >= static_cast<size_t>(options_.max_per_hour) || now - started_ < idle) return {};
  if (!sweeps_->running_id().empty() || !activity_->Recent(idle, now).empty()) return {};
  auto tables = store_->ListTables();
  if (!tables.ok()) return {};
  for (const db::TableSummary& s : *tables) {
    // Mini-sweeps run this runtime's ranks: a peer runtime's table (hccl-tune sweep --runtime) is not theirs.
    if (!IsSingleNode(s.topology.json) || !IsOwnRuntimeTopology(s.topology.json)) continue;
    auto t = store_->GetTable(s.topology.fingerprint, 0);
    if (!t.ok()) continue;
    for (const db::TunedEntry& e : t->entries) {
      if (!e.stale) {
        if (!backoff_.empty()) backoff_.erase(absl::StrCat(s.topology.fingerprint, " ", Describe(e.key)));
        continue;
      }
      const db::EntryKey& k = e.key;
      if (!backoff_.empty()) {
        auto b = backoff_.find(absl::StrCat(s.topology.fingerprint, " ", Describe(k)));
        if (b != backoff_.end() && now < b->second.until) continue;  // failed lately: the next stale entry
      }
      const uint64_t first = FirstPowerOfTwo(k.range.min);
      if (first == 0 || first >= k.range.max) {
        if (skipped_.insert(absl::StrCat(s.topology.fingerprint, " ", Describe(k))).second) {
          Log(LogLevel::kInfo, "mini-sweep: ", s.topology.fingerprint, " ", Describe(k),
              " is stale but holds no power of two to measure; left to a sweep");
        }
        continue;
      }
      // A sweep started by hand (not through this daemon's runner) keeps its row in this daemon's journal.
      if (auto sweeps = store_->ListSweeps(); sweeps.ok()) {
        for (const db::Sweep& sw : *sweeps) {
          if (db::SweepInProgress(sw, db::NowUnixMs())) {
            if (skipped_.insert("running " + sw.id).second) {
              Log(LogLevel::kInfo, "mini-sweep: waiting: sweep ", sw.id, " is marked running in the journal");
            }
            return {};
          }
        }
      }
      v1::StartSweepRequest req;
      req.set_ranks(k.world_size);
      req.add_collectives(std::string(CollectiveName(k.collective)));
      req.add_dtypes(std::string(DataTypeName(k.dtype)));
      if (k.range.max == kUnbounded) {
        req.set_max_bytes(std::max(first, std::min(first * kOpenRangeFactor, kOpenRangeMax)));
      }
      req.set_force(true);  // the idle rule above replaces the sweep's own busy check
      starts_.push_back(now);
      MiniSweepEvent ev{MiniSweepEvent::Kind::kStarted, "", s.topology.fingerprint, k, "", 0};
      auto id = sweeps_->Start(req, {"--range", FormatByteRange(k.range), "--no-table"});
      if (!id.ok()) {
        ev.kind = MiniSweepEvent::Kind::kFailed;
        ev.message = absl::StrCat(id.status().message(), BackOff(s.topology.fingerprint, k, now));
        Log(LogLevel::kWarn, "mini-sweep of ", s.topology.fingerprint, " ", Describe(k), ": ", ev.message);
        return ev;
      }
      ev.sweep_id = *id;
      ev.message = absl::StrCat("started (node idle for ", options_.idle_s, " s; ", starts_.size(), " of at most ",
                                options_.max_per_hour, " this hour)");
      Log(LogLevel::kInfo, "mini-sweep ", *id, " of ", s.topology.fingerprint, " ", Describe(k), ": ", ev.message);
      running_ = Running{*id, s.topology.fingerprint, k, now, false};
      absl::MutexLock lock(&mu_);
      running_id_ = *id;
      return ev;
    }
  }
  return {};
}

void MiniSweeper::Start() {
  if (!options_.enabled) return;
  worker_.Start(absl::Milliseconds(options_.interval_ms), [this] { Tick(); });
}

void MiniSweeper::Stop() { worker_.Stop(); }

}  // namespace hccltune::daemon

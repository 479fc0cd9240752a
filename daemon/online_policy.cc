#include "daemon/online_policy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "runtime/common/logging.h"
#include "runtime/common/peer_configuration.h"

namespace hccltune::daemon {
namespace {

double Median(const std::deque<double>& v) {
  std::vector<double> s(v.begin(), v.end());
  const size_t mid = s.size() / 2;
  std::nth_element(s.begin(), s.begin() + static_cast<ptrdiff_t>(mid), s.end());
  const double hi = s[mid];
  if (s.size() % 2 == 1) return hi;
  return (hi + *std::max_element(s.begin(), s.begin() + static_cast<ptrdiff_t>(mid))) / 2;
}

bool ValidDuration(double us) { return std::isfinite(us) && us > 0; }

// a / b - 1 (how much slower a is than b), 0 when b is no duration: a margin is finite, never inf or NaN.
double Margin(double a, double b) { return ValidDuration(a) && ValidDuration(b) ? a / b - 1 : 0; }

std::string Describe(const db::EntryKey& k) {
  return absl::StrCat(CollectiveName(k.collective), "/", DataTypeName(k.dtype), " world ", k.world_size, " ",
                      FormatByteRange(k.range));
}

}  // namespace

absl::string_view PolicyActionName(PolicyAction::Kind k) {
  switch (k) {
    case PolicyAction::Kind::kExplore: return "explore";
    case PolicyAction::Kind::kStaleNoCandidate: return "stale";
    case PolicyAction::Kind::kSwitch: return "switch";
    case PolicyAction::Kind::kUnconfirmed: return "unconfirmed";
    case PolicyAction::Kind::kKeep: return "keep";
    case PolicyAction::Kind::kWithdraw: return "withdraw";
    case PolicyAction::Kind::kBaseline: return "baseline";
  }
  return "?";
}

absl::Status ValidateOnlinePolicyOptions(const OnlinePolicyOptions& o) {
  auto bad = [](absl::string_view name, auto v, absl::string_view want) {
    return absl::InvalidArgumentError(absl::StrCat("online policy: ", name, " = ", v, ": expected ", want));
  };
  if (!(o.regression_ratio > 1.0 && o.regression_ratio <= 100)) {
    return bad("online_regression_ratio", o.regression_ratio, "a ratio above 1 (e.g. 1.2)");
  }
  if (o.min_samples < 1) return bad("online_min_samples", o.min_samples, "at least 1");
  if (o.window < o.min_samples || o.window < o.explore_min_samples) {
    return bad("online_window", o.window, "at least online_min_samples and online_explore_min_samples");
  }
  if (o.explore_every < 2) return bad("online_explore_every", o.explore_every, "at least 2 (a share of 1/N)");
  if (o.explore_calls < 1) return bad("online_explore_calls", o.explore_calls, "at least 1");
  if (!(o.explore_max_ratio >= 1.0)) return bad("online_explore_max_ratio", o.explore_max_ratio, "at least 1");
  if (o.explore_min_samples < 1) return bad("online_explore_min_samples", o.explore_min_samples, "at least 1");
  if (o.interval_ms < 10) return bad("online_interval_ms", o.interval_ms, "at least 10");
  if (o.explore_timeout_s < 1) return bad("online_explore_timeout_s", o.explore_timeout_s, "at least 1");
  if (o.cooldown_s < 0) return bad("online_cooldown_s", o.cooldown_s, "at least 0");
  if (!(o.min_regression_us >= 0 && o.min_regression_us <= 1e9)) {
    return bad("online_min_regression_us", o.min_regression_us, "a number of microseconds from 0");
  }
  return absl::OkStatus();
}

OnlinePolicy::OnlinePolicy(db::TuningStore* store, Publisher publish, OnlinePolicyOptions options)
    : store_(store), publish_(std::move(publish)), options_(options) {}

OnlinePolicy::~OnlinePolicy() { Stop(); }

void OnlinePolicy::Observe(const std::string& fp, absl::Span<const db::LiveSample> samples, Role reporter) {
  if (!options_.enabled || samples.empty()) return;
  absl::MutexLock lock(&mu_);
  size_t room = pending_count_ >= options_.max_pending ? 0 : options_.max_pending - pending_count_;
  std::vector<Pending>* v = nullptr;
  for (const db::LiveSample& s : samples) {
    // ReportTimings refuses these; a median of 0 (or NaN) would make margins no table accepts.
    if (room == 0 || !ValidDuration(s.duration_us)) {
      ++dropped_;
      continue;
    }
    if (v == nullptr) v = &pending_[fp];
    v->push_back(Pending{s, reporter});
    --room;
    ++pending_count_;
  }
}

std::string OnlinePolicy::KeyId(const db::EntryKey& k) {
  return absl::StrCat(CollectiveName(k.collective), "|", DataTypeName(k.dtype), "|", k.world_size, "|", k.range.min,
                      "|", k.range.max);
}

bool OnlinePolicy::Window::AnyReader() const {
  return std::find(by_reader.begin(), by_reader.end(), true) != by_reader.end();
}

void OnlinePolicy::Add(EntryState& st, const std::string& config, double us, Role reporter) {
  Window& w = st.by_config[config];
  w.us.push_back(us);
  w.by_reader.push_back(reporter != Role::kTuner);
  while (w.us.size() > static_cast<size_t>(options_.window)) {
    w.us.pop_front();
    w.by_reader.pop_front();
  }
}

std::optional<PolicyAction> OnlinePolicy::Judge(const std::string& fp, const db::TunedEntry& e, EntryState& st,
                                                absl::Time now, db::TunedEntry* out) {
  const size_t min_explore = static_cast<size_t>(options_.explore_min_samples);
  Window& mine = st.by_config[e.configuration];
  PolicyAction a{PolicyAction::Kind::kKeep, fp, e.key, e.configuration, e.explore};
  a.baseline_us = e.rank_time_us > 0 ? e.rank_time_us : e.time_us;
  *out = e;
  if (e.model_version > 0 && e.rank_time_us <= 0 && e.explore.empty()) {
    // Predicted: the model's time is no baseline (its error is not a regression); the first live median is.
    if (mine.us.size() < static_cast<size_t>(options_.min_samples)) return std::nullopt;
    a.winner_live_us = Median(mine.us);
    a.baseline_us = a.winner_live_us;
    out->rank_time_us = a.winner_live_us;
    a.kind = PolicyAction::Kind::kBaseline;
    return a;
  }
  if (e.explore.empty()) {
    st.plan_seen = absl::InfinitePast();
    if (now < st.cooldown_until) return std::nullopt;  // just decided: not judged again yet
    if (mine.us.size() < static_cast<size_t>(options_.min_samples) || a.baseline_us <= 0) return std::nullopt;
    a.winner_live_us = Median(mine.us);
    if (a.winner_live_us <= options_.regression_ratio * a.baseline_us ||
        a.winner_live_us <= a.baseline_us + options_.min_regression_us) {
      return std::nullopt;
    }
    // Sustained regression. Explore the runner-up when it was measured close enough to the winner.
    const double runner_up_time = e.time_us * (1 + e.margin);
    const bool candidate_ok = !e.runner_up.empty() && e.runner_up != e.configuration && e.margin >= 0 &&
                              runner_up_time <= options_.explore_max_ratio * e.time_us;
    if (!candidate_ok) {
      if (e.stale) return std::nullopt;  // already marked; nothing new to publish
      out->stale = true;
      a.kind = PolicyAction::Kind::kStaleNoCandidate;
      a.candidate = e.runner_up;
      return a;
    }
    out->stale = true;
    out->explore = e.runner_up;
    out->explore_every = static_cast<uint32_t>(options_.explore_every);
    out->explore_calls = static_cast<uint32_t>(options_.explore_calls);
    st.by_config.erase(e.runner_up);  // the candidate is judged on fresh samples only
    a.kind = PolicyAction::Kind::kExplore;
    a.candidate = e.runner_up;
    return a;
  }
  // A plan is in effect: decide once both sides have samples from the same period.
  if (st.plan_seen == absl::InfinitePast()) st.plan_seen = now;
  Window& cand = st.by_config[e.explore];
  const bool enough = cand.us.size() >= min_explore && mine.us.size() >= min_explore;
  if (!enough && now - st.plan_seen < absl::Seconds(options_.explore_timeout_s)) return std::nullopt;
  if (!mine.us.empty()) a.winner_live_us = Median(mine.us);
  if (!cand.us.empty()) a.candidate_live_us = Median(cand.us);
  out->explore.clear();
  out->explore_every = 0;
  out->explore_calls = 0;
  out->measured_unix_ms = db::NowUnixMs();
  if (!enough) {
    a.kind = PolicyAction::Kind::kWithdraw;
    if (a.winner_live_us > 0) out->rank_time_us = a.winner_live_us;
  } else if (a.candidate_live_us < a.winner_live_us && (mine.AnyReader() || cand.AnyReader())) {
    // Faster by readers' reports: not installed on their word; the stale mark asks for a measurement.
    a.kind = PolicyAction::Kind::kUnconfirmed;
    out->stale = true;
  } else if (a.candidate_live_us < a.winner_live_us) {
    a.kind = PolicyAction::Kind::kSwitch;
    out->configuration = e.explore;
    out->runner_up = e.configuration;
    out->margin = Margin(a.winner_live_us, a.candidate_live_us);
    out->rank_time_us = a.candidate_live_us;
    out->time_us = a.candidate_live_us;
    out->sweep_id = "online";
    out->stale = false;
  } else {
    a.kind = PolicyAction::Kind::kKeep;
    out->rank_time_us = a.winner_live_us;  // the regression is the new normal; the candidate is no better
    out->margin = Margin(a.candidate_live_us, a.winner_live_us);
    out->stale = false;
  }
  st.by_config.clear();
  st.plan_seen = absl::InfinitePast();
  if (a.kind != PolicyAction::Kind::kWithdraw) st.cooldown_until = now + absl::Seconds(options_.cooldown_s);
  return a;
}

absl::StatusOr<std::vector<PolicyAction>> OnlinePolicy::Evaluate(absl::Time now) {
  std::map<std::string, std::vector<Pending>> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.swap(pending_);
    pending_count_ = 0;
  }
  std::vector<PolicyAction> actions;
  absl::Status first_error;
  // Topologies with new samples, and those with a plan in effect (a plan may time out without samples).
  std::vector<std::string> fps;
  for (const auto& [fp, s] : pending) fps.push_back(fp);
  for (const auto& [fp, ts] : state_) {
    if (pending.count(fp) == 0) fps.push_back(fp);
  }
  for (const std::string& fp : fps) {
    auto table = store_->GetTable(fp, 0);
    if (!table.ok()) {
      if (table.status().code() != absl::StatusCode::kNotFound && first_error.ok()) first_error = table.status();
      state_.erase(fp);
      continue;
    }
    // A peer runtime's table (hccl-tune sweep --runtime) gets no live samples of ours, no plans, no staleness.
    if (!IsOwnRuntimeTopology(table->topology.json)) {
      state_.erase(fp);
      continue;
    }
    TopologyState& ts = state_[fp];
    // Windows measured an entry that has since been re-measured by someone else (a mini-sweep, a sweep, an
    // import) are dropped; state of entries no longer in the table is forgotten.
    std::map<std::string, EntryState> kept;
    for (const db::TunedEntry& e : table->entries) {
      auto it = ts.entries.find(KeyId(e.key));
      if (it == ts.entries.end()) continue;
      const std::string measurement = absl::StrCat(e.sweep_id, "@", e.measured_unix_ms);
      if (it->second.measurement != measurement) {
        it->second.by_config.clear();
        it->second.plan_seen = absl::InfinitePast();
        it->second.measurement = measurement;
      }
      kept.insert(ts.entries.extract(it));
    }
    ts.entries.swap(kept);
    for (const auto& [s, reporter] : pending[fp]) {
      const db::TunedEntry* e = db::FindEntry(table->entries, s.collective, s.dtype, s.world_size, s.bytes);
      if (e == nullptr) continue;
      if (s.configuration != e->configuration && s.configuration != e->explore) continue;  // overrides, stale plans
      auto [it, fresh] = ts.entries.try_emplace(KeyId(e->key));
      if (fresh) it->second.measurement = absl::StrCat(e->sweep_id, "@", e->measured_unix_ms);
      Add(it->second, s.configuration, s.duration_us, reporter);
    }
    std::vector<db::TunedEntry> next = table->entries;
    std::vector<PolicyAction> mine;
    for (size_t i = 0; i < table->entries.size(); ++i) {
      auto it = ts.entries.find(KeyId(table->entries[i].key));
      if (it == ts.entries.end()) continue;
      auto action = Judge(fp, table->entries[i], it->second, now, &next[i]);
      if (action) mine.push_back(*std::move(action));
    }
    if (mine.empty()) continue;
    auto version = publish_(table->topology, next, table->version);
    if (absl::IsAborted(version.status())) {
      ++conflicts_;
      Log(LogLevel::kInfo, "online policy: table ", fp, " changed while being judged (", version.status().message(),
          "); judged again on the newer version");
      continue;
    }
    if (!version.ok()) {
      Log(LogLevel::kError, "online policy: cannot publish table ", fp, ": ", version.status().ToString());
      if (first_error.ok()) first_error = version.status();
      ts.entries.clear();  // start over from fresh windows
      continue;
    }
    ++published_;
    for (PolicyAction& a : mine) {
      a.version = *version;
      by_kind_[static_cast<int>(a.kind)].fetch_add(1, std::memory_order_relaxed);
      Log(LogLevel::kInfo, "online policy: table ", fp, " v", *version, ": ", Describe(a.key), " ",
          PolicyActionName(a.kind), ": winner ", a.winner, " live ", a.winner_live_us, " us (baseline ", a.baseline_us,
          " us)", a.candidate.empty() ? "" : absl::StrCat("; candidate ", a.candidate),
          a.candidate_live_us > 0 ? absl::StrCat(" live ", a.candidate_live_us, " us") : "",
          a.kind == PolicyAction::Kind::kUnconfirmed
              ? " (readers' reports only: the winner stays and the entry stale until a mini-sweep or a tuner's "
                "sweep measures them)"
              : "");
      actions.push_back(std::move(a));
    }
  }
  if (!first_error.ok() && actions.empty()) return first_error;
  return actions;
}

std::vector<std::pair<std::string, uint64_t>> OnlinePolicy::ActionCounts() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (int k = 0; k < kKinds; ++k) {
    out.emplace_back(PolicyActionName(static_cast<PolicyAction::Kind>(k)), by_kind_[k].load(std::memory_order_relaxed));
  }
  return out;
}

void OnlinePolicy::Start() {
  if (!options_.enabled) return;
  worker_.Start(absl::Milliseconds(options_.interval_ms), [this] {
    auto r = Evaluate();
    if (!r.ok()) Log(LogLevel::kWarn, "online policy: ", r.status().message());
  });
}

void OnlinePolicy::Stop() { worker_.Stop(); }

}  // namespace hccltune::daemon

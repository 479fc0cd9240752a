#include "db/memory_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/common/peer_configuration.h"

namespace hccltune::db {

InMemoryTuningStore::InMemoryTuningStore(StoreOptions options) : options_(options) {}

absl::StatusOr<int64_t> InMemoryTuningStore::PutTable(const Topology& topology, absl::Span<const TunedEntry> entries,
                                                      const PutOptions& options) {
  auto sorted = ValidatePut(topology, entries, options);
  if (!sorted.ok()) return sorted.status();
  absl::MutexLock lock(&mu_);
  auto it = topologies_.find(topology.fingerprint);
  if (it == topologies_.end()) {
    auto topology_class = ValidateTopology(topology);  // the JSON is required the first time
    if (!topology_class.ok()) return topology_class.status();
    it = topologies_.emplace(topology.fingerprint, TopologyState{topology.json, *topology_class}).first;
  }
  TopologyState& state = it->second;
  return PutLocked(state, topology.fingerprint, *std::move(sorted), options);
}

absl::StatusOr<int64_t> InMemoryTuningStore::PutLocked(TopologyState& state, const std::string& fingerprint,
                                                       std::vector<TunedEntry> sorted, const PutOptions& options) {
  std::string hash = ContentHash(sorted);
  if (absl::Status s =
          CheckExpectedVersion(fingerprint, state.versions.empty() ? 0 : state.versions.rbegin()->first, options);
      !s.ok()) {
    return s;
  }
  if (!state.versions.empty() && state.versions.rbegin()->second.content_hash == hash) {
    return state.versions.rbegin()->first;
  }
  auto version = NewVersion(fingerprint, state.next_version, options);
  if (!version.ok()) return version.status();
  Table t;
  t.topology = Topology{fingerprint, state.json, state.topology_class};
  t.version = *version;
  t.content_hash = std::move(hash);
  t.created_unix_ms = options.created_unix_ms != 0 ? options.created_unix_ms : NowUnixMs();
  t.entries = std::move(sorted);
  state.next_version = t.version + 1;
  state.versions.emplace(*version, std::move(t));
  while (static_cast<int>(state.versions.size()) > options_.max_versions) state.versions.erase(state.versions.begin());
  return *version;
}

absl::StatusOr<const Table*> InMemoryTuningStore::FindLocked(absl::string_view fingerprint, int64_t version) {
  if (absl::Status s = ValidateFingerprint(fingerprint); !s.ok()) return s;
  auto it = topologies_.find(fingerprint);
  if (it == topologies_.end() || it->second.versions.empty()) {
    return absl::NotFoundError(absl::StrCat("no table for topology ", fingerprint));
  }
  const auto& versions = it->second.versions;
  if (version == 0) return &versions.rbegin()->second;
  auto v = versions.find(version);
  if (v == versions.end()) {
    return absl::NotFoundError(absl::StrCat("topology ", fingerprint, " has no version ", version,
                                            " (kept: ", versions.begin()->first, "..", versions.rbegin()->first, ")"));
  }
  return &v->second;
}

absl::StatusOr<Table> InMemoryTuningStore::GetTable(absl::string_view fingerprint, int64_t version) {
  absl::MutexLock lock(&mu_);
  auto t = FindLocked(fingerprint, version);
  if (!t.ok()) return t.status();
  return **t;
}

absl::StatusOr<std::optional<TunedEntry>> InMemoryTuningStore::Lookup(absl::string_view fingerprint,
                                                                      Collective collective, DataType dtype,
                                                                      int world_size, uint64_t bytes, int64_t version) {
  absl::MutexLock lock(&mu_);
  auto t = FindLocked(fingerprint, version);
  if (!t.ok()) return t.status();
  const TunedEntry* e = FindEntry((*t)->entries, collective, dtype, world_size, bytes);
  if (e == nullptr) return std::optional<TunedEntry>();
  return std::optional<TunedEntry>(*e);
}

absl::StatusOr<std::vector<TableSummary>> InMemoryTuningStore::ListTables() {
  absl::MutexLock lock(&mu_);
  return ListLocked("");
}

absl::StatusOr<std::vector<TableSummary>> InMemoryTuningStore::ListTablesOfClass(absl::string_view topology_class) {
  if (absl::Status s = ValidateTopologyClass(topology_class); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  return ListLocked(topology_class);
}

std::vector<TableSummary> InMemoryTuningStore::ListLocked(absl::string_view topology_class) {
  std::vector<TableSummary> out;
  for (const auto& [fp, state] : topologies_) {
    if (state.versions.empty() || (!topology_class.empty() && state.topology_class != topology_class)) continue;
    TableSummary s;
    s.topology = Topology{fp, state.json, state.topology_class};
    const Table& latest = state.versions.rbegin()->second;
    s.latest_version = latest.version;
    for (const auto& [v, t] : state.versions) s.versions.push_back(v);
    s.entries = latest.entries.size();
    s.updated_unix_ms = latest.created_unix_ms;
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<uint64_t> InMemoryTuningStore::DeleteTable(absl::string_view fingerprint) {
  if (absl::Status s = ValidateFingerprint(fingerprint); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = topologies_.find(fingerprint);
  if (it == topologies_.end() || it->second.versions.empty()) {
    return absl::NotFoundError(absl::StrCat("no table for topology ", fingerprint));
  }
  uint64_t n = it->second.versions.size();
  it->second.versions.clear();  // next_version survives: numbers only grow
  return n;
}

absl::StatusOr<int64_t> InMemoryTuningStore::Rollback(absl::string_view fingerprint, int64_t to_version) {
  absl::MutexLock lock(&mu_);
  auto latest = FindLocked(fingerprint, 0);
  if (!latest.ok()) return latest.status();
  TopologyState& state = topologies_.find(fingerprint)->second;
  if (to_version == 0) {
    if (state.versions.size() < 2) {
      return absl::FailedPreconditionError(absl::StrCat("topology ", fingerprint, " has no earlier version"));
    }
    to_version = std::prev(state.versions.end(), 2)->first;
  }
  auto target = FindLocked(fingerprint, to_version);
  if (!target.ok()) return target.status();
  std::vector<TunedEntry> entries = (*target)->entries;
  return PutLocked(state, std::string(fingerprint), std::move(entries), PutOptions{});
}

absl::Status InMemoryTuningStore::RecordLiveSamples(absl::string_view fingerprint,
                                                    absl::Span<const LiveSample> samples) {
  if (absl::Status s = ValidateFingerprint(fingerprint); !s.ok()) return s;
  for (const LiveSample& s : samples) {
    if (absl::Status st = ValidateLiveSample(s); !st.ok()) return st;
  }
  absl::MutexLock lock(&mu_);
  auto& stats = live_[std::string(fingerprint)];
  for (const LiveSample& s : samples) {
    LiveDelta& d = stats[LiveKey{s.collective, s.dtype, s.world_size, SizeBucket(s.bytes).min, s.configuration}];
    d.count++;
    d.sum_us += s.duration_us;
    d.last_seen_unix_ms = std::max(d.last_seen_unix_ms, s.unix_ms);
    d.histogram.Add(s.duration_us);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<LiveStats>> InMemoryTuningStore::GetLiveStats(absl::string_view fingerprint) {
  if (absl::Status s = ValidateFingerprint(fingerprint); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::vector<LiveStats> out;
  auto it = live_.find(fingerprint);
  if (it == live_.end()) return out;
  for (const auto& [key, d] : it->second) {
    LiveStats s;
    s.fingerprint = std::string(fingerprint);
    s.collective = std::get<0>(key);
    s.dtype = std::get<1>(key);
    s.world_size = std::get<2>(key);
    s.bucket = SizeBucket(std::get<3>(key));
    s.configuration = std::get<4>(key);
    s.count = d.count;
    s.mean_us = d.count ? d.sum_us / static_cast<double>(d.count) : 0;
    s.median_us = d.histogram.Quantile(0.5);
    s.p90_us = d.histogram.Quantile(0.9);
    s.last_seen_unix_ms = d.last_seen_unix_ms;
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status InMemoryTuningStore::PutSweep(const Sweep& sweep) {
  if (absl::Status s = ValidateSweep(sweep); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  sweeps_[sweep.id].sweep = sweep;
  return absl::OkStatus();
}

absl::Status InMemoryTuningStore::PutLinks(const StoredLinks& links) {
  if (absl::Status s = ValidateLinks(links); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  StoredLinks& kept = links_[links.fingerprint];
  kept = links;
  kept.stored_unix_ms = NowUnixMs();
  return absl::OkStatus();
}

absl::StatusOr<StoredLinks> InMemoryTuningStore::GetLinks(absl::string_view fingerprint) {
  if (absl::Status s = ValidateFingerprint(fingerprint); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = links_.find(fingerprint);
  if (it == links_.end()) {
    return absl::NotFoundError(absl::StrCat("no link measurement stored for topology ", fingerprint));
  }
  return it->second;
}

absl::StatusOr<int64_t> InMemoryTuningStore::PutModel(const StoredModel& model) {
  if (absl::Status s = ValidateModel(model); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto& versions = models_[model.topology_class];
  const int64_t version = versions.empty() ? 1 : versions.rbegin()->first + 1;
  StoredModel& kept = versions[version];
  kept = model;
  kept.version = version;
  kept.stored_unix_ms = NowUnixMs();
  return version;
}

absl::StatusOr<StoredModel> InMemoryTuningStore::GetModel(absl::string_view topology_class, int64_t version) {
  if (absl::Status s = ValidateTopologyClass(topology_class); !s.ok()) return s;
  if (version < 0) return absl::InvalidArgumentError(absl::StrCat("model version ", version, " must not be negative"));
  absl::MutexLock lock(&mu_);
  auto it = models_.find(topology_class);
  if (it == models_.end() || it->second.empty()) return ModelNotFound(topology_class, version);
  if (version == 0) return it->second.rbegin()->second;
  auto v = it->second.find(version);
  if (v == it->second.end()) return ModelNotFound(topology_class, version);
  return v->second;
}

absl::StatusOr<std::vector<StoredModel>> InMemoryTuningStore::ListModels() {
  absl::MutexLock lock(&mu_);
  std::vector<StoredModel> out;
  for (const auto& [cls, versions] : models_) {
    if (!versions.empty()) out.push_back(versions.rbegin()->second);
  }
  return out;
}

absl::StatusOr<Sweep> InMemoryTuningStore::GetSweep(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(id);
  if (it == sweeps_.end()) return absl::NotFoundError(absl::StrCat("no sweep '", id, "'"));
  return it->second.sweep;
}

absl::StatusOr<std::vector<Sweep>> InMemoryTuningStore::ListSweeps() {
  absl::MutexLock lock(&mu_);
  std::vector<Sweep> out;
  for (const auto& [id, s] : sweeps_) out.push_back(s.sweep);
  std::sort(out.begin(), out.end(), [](const Sweep& a, const Sweep& b) {
    return a.started_unix_ms != b.started_unix_ms ? a.started_unix_ms > b.started_unix_ms : a.id > b.id;
  });
  return out;
}

absl::Status InMemoryTuningStore::AddSweepSamples(absl::string_view sweep_id, absl::Span<const SweepSample> samples) {
  std::vector<SweepSample> normalized(samples.begin(), samples.end());
  for (SweepSample& s : normalized) {
    if (absl::Status st = ValidateSweepSample(s); !st.ok()) return st;
    s.configuration = *CanonicalConfigurationString(s.configuration);
  }
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return absl::NotFoundError(absl::StrCat("no sweep '", sweep_id, "'"));
  it->second.samples.insert(it->second.samples.end(), normalized.begin(), normalized.end());
  TrimSweepSamplesLocked(it->second);
  return absl::OkStatus();
}

void InMemoryTuningStore::TrimSweepSamplesLocked(const SweepState& written) {
  std::vector<SweepState*> order;
  for (auto& [id, s] : sweeps_) order.push_back(&s);
  std::sort(order.begin(), order.end(), [](const SweepState* a, const SweepState* b) {
    return a->sweep.started_unix_ms != b->sweep.started_unix_ms ? a->sweep.started_unix_ms > b->sweep.started_unix_ms
                                                                : a->sweep.id > b->sweep.id;
  });
  for (size_t i = options_.max_sweeps_with_samples; i < order.size(); ++i) {
    // Never the sweep being written nor one marked running (a resumed sweep keeps its first start time).
    if (order[i] == &written || order[i]->sweep.status == SweepStatus::kRunning) continue;
    order[i]->samples.clear();
  }
}

absl::StatusOr<std::vector<SweepSample>> InMemoryTuningStore::GetSweepSamples(absl::string_view sweep_id) {
  absl::MutexLock lock(&mu_);
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return absl::NotFoundError(absl::StrCat("no sweep '", sweep_id, "'"));
  return it->second.samples;
}

absl::StatusOr<StoreInfo> InMemoryTuningStore::Info() {
  absl::MutexLock lock(&mu_);
  StoreInfo info;
  info.schema_version = 0;
  for (const auto& [fp, state] : topologies_) {
    if (state.versions.empty()) continue;
    info.tables++;
    info.entries += state.versions.rbegin()->second.entries.size();
  }
  for (const auto& [fp, stats] : live_) {
    for (const auto& [k, d] : stats) info.live_samples += d.count;
  }
  return info;
}

}  // namespace hccltune::db

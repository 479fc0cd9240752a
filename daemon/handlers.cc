#include "daemon/handlers.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/predicted_table.h"
#include "db/store_util.h"
#include "hccltune/version.h"
#include "model/profile.h"
#include "rpc/proto_convert.h"
#include "runtime/common/configuration.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/logging.h"
#include "runtime/common/status_macros.h"

namespace hccltune::daemon {
namespace {

constexpr size_t kMaxCanonicalCache = 4096;
constexpr size_t kMaxLegacyTopologies = 4096;
constexpr size_t kMaxUnpredictable = 4096;
// A reporter's client id ("host:pid/rank").
constexpr size_t kMaxClientIdBytes = 256;

absl::Status CheckVersion(int64_t v, absl::string_view field) {
  if (v < 0) return absl::InvalidArgumentError(absl::StrCat(field, " ", v, " must not be negative"));
  return absl::OkStatus();
}

}  // namespace

TunerHandlers::TunerHandlers(db::TuningStore* store, LiveIngest* ingest, HandlerLimits limits)
    : store_(store), ingest_(ingest), limits_(limits) {}

absl::StatusOr<std::shared_ptr<const db::Table>> TunerHandlers::Latest(const std::string& fp) {
  HT_RETURN_IF_ERROR(db::ValidateFingerprint(fp));
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(fp);
    if (it != cache_.end()) return it->second;
    generation = generation_;
  }
  auto t = store_->GetTable(fp, 0);
  if (!t.ok()) return t.status();
  auto shared = std::make_shared<const db::Table>(*std::move(t));
  absl::MutexLock lock(&mu_);
  if (generation == generation_) cache_[fp] = shared;  // no change raced with the read
  return shared;
}

absl::StatusOr<std::shared_ptr<const db::Table>> TunerHandlers::LatestOrPredicted(const db::Topology& topology) {
  auto latest = Latest(topology.fingerprint);
  if (!absl::IsNotFound(latest.status()) || topology.json.empty()) return latest;
  uint64_t models = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = unpredictable_.find(topology.fingerprint);
    if (it != unpredictable_.end() && it->second == models_generation_) return latest;
    models = models_generation_;
  }
  if (absl::Status s = Predict(topology); !s.ok()) {
    Log(LogLevel::kDebug, "no predicted table for ", topology.fingerprint, ": ", s.message());
    absl::MutexLock lock(&mu_);
    if (unpredictable_.size() >= kMaxUnpredictable) unpredictable_.clear();
    unpredictable_[topology.fingerprint] = models;
    return latest;
  }
  return Latest(topology.fingerprint);
}

absl::Status TunerHandlers::Predict(const db::Topology& topology) {
  auto keys = CanonicalTopology(topology.json);
  if (!keys.ok()) return keys.status();
  auto shape = model::PredictableShape(keys->json);
  if (!shape.ok()) return shape.status();
  auto stored = store_->GetModel(keys->topology_class, 0);
  if (!stored.ok()) return stored.status();
  auto profile = model::ParseProfile(stored->profile_json,
                                     absl::StrCat("model ", stored->version, " of class ", keys->topology_class));
  if (!profile.ok()) return profile.status();
  auto entries = PredictTable(*profile, stored->version, *shape);
  if (!entries.ok()) return entries.status();
  auto v = Publish(db::Topology{topology.fingerprint, keys->json, keys->topology_class}, *entries,
                   db::PutOptions{.expected_version = -1});
  if (absl::IsAborted(v.status())) return absl::OkStatus();  // a table was stored meanwhile: it is served
  if (!v.ok()) return v.status();
  Log(LogLevel::kInfo, "table ", topology.fingerprint, " (", shape->nodes, "x", shape->ranks_per_node,
      ") predicted by model version ", stored->version, " of class ", keys->topology_class, ": ", entries->size(),
      " entries");
  return absl::OkStatus();
}

absl::StatusOr<db::Topology> TunerHandlers::Resolve(const v1::Topology& t) {
  const std::string& fp = t.fingerprint();
  HT_RETURN_IF_ERROR(db::ValidateFingerprint(fp));
  {
    absl::MutexLock lock(&legacy_mu_);
    auto it = legacy_.find(fp);
    if (it != legacy_.end()) return it->second;
  }
  if (t.json().empty()) {
    if (!absl::IsNotFound(Latest(fp).status())) return db::Topology{fp, ""};
    if (auto found = FindFormat1(fp)) return *found;
    return db::Topology{fp, ""};  // NotFound for the caller
  }
  // Canonical JSON of the current format starts so (its keys are sorted): nothing to parse.
  if (absl::StartsWith(t.json(), absl::StrCat("{\"format\":", kTopologyFormat, ","))) return db::Topology{fp, t.json()};
  auto keys = CanonicalTopology(t.json());
  if (absl::IsFailedPrecondition(keys.status())) {
    return absl::FailedPreconditionError(absl::StrCat("hccl-tuned: ", keys.status().message()));
  }
  if (!keys.ok()) return db::Topology{fp, t.json()};  // lookups go by the fingerprint; a write is judged by the store
  if (Fingerprint(t.json()) != fp) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology fingerprint ", fp, " does not match its JSON (which hashes to ", Fingerprint(t.json()), ")"));
  }
  db::Topology current{keys->fingerprint, keys->json, keys->topology_class};
  if (current.fingerprint != fp) Remember(fp, current);
  return current;
}

void TunerHandlers::Remember(const std::string& format1, const db::Topology& current) {
  absl::MutexLock lock(&legacy_mu_);
  if (legacy_.size() >= kMaxLegacyTopologies) legacy_.clear();
  legacy_[format1] = current;
}

std::optional<db::Topology> TunerHandlers::FindFormat1(const std::string& fp) {
  auto list = store_->ListTables();
  if (!list.ok()) return std::nullopt;
  for (const db::TableSummary& s : *list) {
    auto d = ParseTopologyJson(s.topology.json);
    std::optional<std::string> old = d.ok() ? Format1TopologyJson(*d) : std::nullopt;
    if (!old || Fingerprint(*old) != fp) continue;
    Remember(fp, s.topology);
    return s.topology;
  }
  return std::nullopt;
}

void TunerHandlers::Changed(const std::string& fp) {
  {
    absl::MutexLock lock(&mu_);
    cache_.erase(fp);
    for (auto it = reply_cache_.lower_bound({fp, 0}); it != reply_cache_.end() && it->first.first == fp;) {
      it = reply_cache_.erase(it);
    }
    ++generation_;
  }
  if (change_observer_) change_observer_(fp);
}

absl::Status TunerHandlers::GetTable(const v1::GetTableRequest& req, v1::GetTableResponse* resp) {
  auto bytes = GetTableBytes(req);
  if (!bytes.ok()) return bytes.status();
  if (!resp->ParseFromString(**bytes)) return absl::InternalError("cannot parse a cached GetTable reply");
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const std::string>> TunerHandlers::GetTableBytes(const v1::GetTableRequest& req) {
  HT_RETURN_IF_ERROR(rpc::CheckWorldFromWire(req.world_size(), true));
  HT_RETURN_IF_ERROR(CheckVersion(req.if_newer_than(), "if_newer_than"));
  HT_RETURN_IF_ERROR(CheckVersion(req.version(), "version"));
  auto topology = Resolve(req.topology());
  if (!topology.ok()) return topology.status();
  if (req.version() != 0) {  // pinned: not cached
    auto t = store_->GetTable(topology->fingerprint, req.version());
    if (!t.ok()) return t.status();
    v1::GetTableResponse resp;
    rpc::TableToProto(*t, req.world_size(), resp.mutable_table());
    return std::make_shared<const std::string>(resp.SerializeAsString());
  }
  auto latest = LatestOrPredicted(*topology);
  if (!latest.ok()) return latest.status();
  const db::Table& table = **latest;
  if (req.if_newer_than() != 0 && req.if_newer_than() >= table.version) {
    v1::GetTableResponse resp;
    resp.set_unchanged(true);
    return std::make_shared<const std::string>(resp.SerializeAsString());
  }
  const auto key = std::make_pair(table.topology.fingerprint, static_cast<int>(req.world_size()));
  {
    absl::MutexLock lock(&mu_);
    auto it = reply_cache_.find(key);
    if (it != reply_cache_.end() && it->second.first == table.version) return it->second.second;
  }
  v1::GetTableResponse resp;
  rpc::TableToProto(table, req.world_size(), resp.mutable_table());
  auto bytes = std::make_shared<const std::string>(resp.SerializeAsString());
  absl::MutexLock lock(&mu_);
  auto cached = cache_.find(key.first);
  if (cached != cache_.end() && cached->second->version == table.version) reply_cache_[key] = {table.version, bytes};
  return bytes;
}

absl::Status TunerHandlers::GetConfig(const v1::GetConfigRequest& req, v1::GetConfigResponse* resp) {
  auto coll = rpc::CollectiveFromWire(req.collective());
  if (!coll.ok()) return coll.status();
  auto dtype = rpc::DataTypeFromWire(req.dtype());
  if (!dtype.ok()) return dtype.status();
  HT_RETURN_IF_ERROR(rpc::CheckWorldFromWire(req.world_size(), false));
  HT_RETURN_IF_ERROR(rpc::CheckBytesFromWire(req.bytes()));
  auto topology = Resolve(req.topology());
  if (!topology.ok()) return topology.status();
  auto t = LatestOrPredicted(*topology);
  if (!t.ok()) return t.status();
  resp->set_table_version((*t)->version);
  const db::TunedEntry* e = db::FindEntry((*t)->entries, *coll, *dtype, req.world_size(), req.bytes());
  resp->set_found(e != nullptr);
  if (e != nullptr) rpc::EntryToProto(*e, resp->mutable_entry());
  return absl::OkStatus();
}

absl::Status TunerHandlers::PutTable(const v1::PutTableRequest& req, v1::PutTableResponse* resp) {
  HT_RETURN_IF_ERROR(CheckVersion(req.min_version(), "min_version"));
  if (req.expected_version() < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected_version ", req.expected_version(), " must be -1 (no table yet), 0 (any) or a version"));
  }
  if (req.entries_size() > limits_.max_table_entries) {
    return absl::InvalidArgumentError(
        absl::StrCat("table of ", req.entries_size(), " entries exceeds the limit of ", limits_.max_table_entries));
  }
  std::vector<db::TunedEntry> entries;
  entries.reserve(req.entries_size());
  for (int i = 0; i < req.entries_size(); ++i) {
    auto e = rpc::EntryFromProto(req.entries(i));
    if (!e.ok()) return absl::InvalidArgumentError(absl::StrCat("entries[", i, "]: ", e.status().message()));
    entries.push_back(*std::move(e));
  }
  auto topology = Resolve(req.topology());
  if (!topology.ok()) return topology.status();
  const std::string& fp = topology->fingerprint;
  int64_t before = 0;
  if (auto cur = Latest(fp); cur.ok()) before = (*cur)->version;
  auto v = store_->PutTable(*topology, entries,
                            db::PutOptions{req.min_version(), req.created_unix_ms(), req.expected_version()});
  if (!v.ok()) return v.status();
  resp->set_version(*v);
  resp->set_changed(*v != before);
  if (*v != before) {
    Changed(fp);
    Log(LogLevel::kInfo, "table ", fp, " is now version ", *v, " (", entries.size(), " entries)");
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> TunerHandlers::Publish(const db::Topology& topology, const std::vector<db::TunedEntry>& entries,
                                               const db::PutOptions& options) {
  int64_t before = 0;
  if (auto cur = Latest(topology.fingerprint); cur.ok()) before = (*cur)->version;
  auto v = store_->PutTable(topology, entries, options);
  if (!v.ok()) return v.status();
  if (*v != before) {
    Changed(topology.fingerprint);
    Log(LogLevel::kInfo, "table ", topology.fingerprint, " is now version ", *v, " (", entries.size(), " entries)");
  }
  return v;
}

absl::Status TunerHandlers::ListTables(const v1::ListTablesRequest& req, v1::ListTablesResponse* resp) {
  auto list = req.topology_class().empty() ? store_->ListTables() : store_->ListTablesOfClass(req.topology_class());
  if (!list.ok()) return list.status();
  for (const db::TableSummary& s : *list) rpc::SummaryToProto(s, resp->add_tables());
  return absl::OkStatus();
}

absl::Status TunerHandlers::DeleteTable(const v1::DeleteTableRequest& req, v1::DeleteTableResponse* resp) {
  auto topology = Resolve(req.topology());
  if (!topology.ok()) return topology.status();
  auto n = store_->DeleteTable(topology->fingerprint);
  if (!n.ok()) return n.status();
  Changed(topology->fingerprint);
  resp->set_versions_deleted(*n);
  Log(LogLevel::kInfo, "table ", topology->fingerprint, " deleted (", *n, " versions)");
  return absl::OkStatus();
}

absl::Status TunerHandlers::Rollback(const v1::RollbackRequest& req, v1::RollbackResponse* resp) {
  HT_RETURN_IF_ERROR(CheckVersion(req.to_version(), "to_version"));
  auto topology = Resolve(req.topology());
  if (!topology.ok()) return topology.status();
  auto v = store_->Rollback(topology->fingerprint, req.to_version());
  if (!v.ok()) return v.status();
  Changed(topology->fingerprint);
  resp->set_new_version(*v);
  Log(LogLevel::kInfo, "table ", topology->fingerprint, " rolled back: now version ", *v);
  return absl::OkStatus();
}

absl::Status TunerHandlers::Status(const v1::StatusRequest&, v1::StatusResponse* resp) {
  auto info = store_->Info();
  if (!info.ok()) return info.status();
  resp->set_library_version(HCCL_TUNE_VERSION);
  resp->set_db_path(info->path);
  resp->set_db_bytes(info->db_bytes);
  resp->set_tables(info->tables);
  resp->set_entries(info->entries);
  resp->set_live_samples(info->live_samples);
  resp->set_samples_dropped(ingest_->dropped());
  resp->set_samples_queued(ingest_->queued());
  resp->set_connected_clients(static_cast<uint32_t>(std::max(0, streams_.load())));
  resp->set_uptime_s(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count());
  resp->set_schema_version(info->schema_version);
  resp->set_topology_format(kTopologyFormat);
  resp->set_exports_dir(exports_dir_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> TunerHandlers::CanonicalConfiguration(const std::string& text) {
  {
    absl::MutexLock lock(&config_mu_);
    auto it = canonical_.find(text);
    if (it != canonical_.end()) return it->second;
  }
  if (absl::Status s = db::CheckTextBytes(text, db::kMaxTextBytes, "configuration"); !s.ok()) return s;
  auto parsed = Configuration::Parse(text);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  std::string canonical = parsed->ToString();
  absl::MutexLock lock(&config_mu_);
  if (canonical_.size() >= kMaxCanonicalCache) canonical_.clear();
  canonical_.emplace(text, canonical);
  return canonical;
}

absl::Status TunerHandlers::ReportBatch(const v1::TimingBatch& batch, v1::ReportTimingsResponse* resp, Role reporter) {
  absl::Status s = AcceptBatch(batch, resp, reporter);
  if (!s.ok()) report_errors_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

absl::Status TunerHandlers::AcceptBatch(const v1::TimingBatch& batch, v1::ReportTimingsResponse* resp, Role reporter) {
  auto topology = Resolve(batch.topology());
  if (!topology.ok()) return topology.status();
  const std::string& fp = topology->fingerprint;
  if (batch.samples_size() > limits_.max_batch_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch of ", batch.samples_size(), " samples exceeds the limit of ", limits_.max_batch_samples));
  }
  if (absl::Status s = db::CheckTextBytes(batch.client_id(), kMaxClientIdBytes, "client_id"); !s.ok()) return s;
  const int64_t now = db::NowUnixMs();
  std::vector<db::LiveSample> samples;
  samples.reserve(batch.samples_size());
  for (int i = 0; i < batch.samples_size(); ++i) {
    const v1::TimingSample& p = batch.samples(i);
    db::LiveSample s;
    auto coll = rpc::CollectiveFromWire(p.collective());
    auto dtype = rpc::DataTypeFromWire(p.dtype());
    auto config = CanonicalConfiguration(p.configuration());
    absl::Status st = !coll.ok() ? coll.status() : !dtype.ok() ? dtype.status() : config.status();
    if (st.ok() && !(std::isfinite(p.duration_us()) && p.duration_us() > 0)) {
      // No call takes 0 us: such a sample would give the online policy a median of 0 and an infinite margin.
      st = absl::InvalidArgumentError(
          absl::StrCat("duration_us ", p.duration_us(), " is not a positive, finite number of microseconds"));
    }
    if (st.ok()) {
      s = db::LiveSample{*coll, *dtype, p.world_size(), p.bytes(), *config, p.duration_us(), now};
      st = db::ValidateLiveSample(s);
    }
    if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat("samples[", i, "]: ", st.message()));
    samples.push_back(std::move(s));
  }
  if (observer_) observer_(fp, samples, reporter);
  const size_t n = samples.size();
  activity_.Note(batch.client_id(), fp, n);
  const size_t accepted = ingest_->Offer(fp, std::move(samples));
  resp->set_accepted(resp->accepted() + accepted);
  resp->set_dropped(resp->dropped() + (n - accepted));
  return absl::OkStatus();
}

absl::Status TunerHandlers::CheckWatch(const v1::WatchTableRequest& req) {
  HT_RETURN_IF_ERROR(Resolve(req.topology()).status());
  HT_RETURN_IF_ERROR(rpc::CheckWorldFromWire(req.world_size(), true));
  HT_RETURN_IF_ERROR(CheckVersion(req.after_version(), "after_version"));
  if (shutting_down_) return absl::UnavailableError("hccl-tuned is shutting down");
  return absl::OkStatus();
}

bool TunerHandlers::WaitForTable(const v1::WatchTableRequest& req, int64_t after_version, absl::Duration timeout,
                                 v1::Table* out) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!shutting_down_) {
    uint64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      generation = generation_;
    }
    auto topology = Resolve(req.topology());
    if (!topology.ok()) return false;
    auto t = Latest(topology->fingerprint);
    if (t.ok() && (*t)->version > after_version) {
      rpc::TableToProto(**t, req.world_size(), out);
      return true;
    }
    absl::MutexLock lock(&mu_);
    auto changed = [this, generation]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return generation_ != generation || shutting_down_.load();
    };
    if (!mu_.AwaitWithDeadline(absl::Condition(&changed), deadline)) return false;
  }
  return false;
}

void TunerHandlers::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  ++generation_;
}

}  // namespace hccltune::daemon

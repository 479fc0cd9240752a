#include "rpc/remote_store.h"

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "hccltune/version.h"
#include "rpc/channel.h"
#include "rpc/proto_convert.h"
#include "rpc/sweep_convert.h"
#include "runtime/common/fingerprint.h"

namespace hccltune::rpc {
namespace {

absl::Status FromGrpc(const grpc::Status& s, absl::string_view target) {
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(absl::StrCat("hccl-tuned at ", target, " is not reachable: ", s.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

absl::Status NotRemote(absl::string_view what) {
  return absl::UnimplementedError(absl::StrCat(what, " is not offered by the daemon's service; use --db"));
}

}  // namespace

RemoteTuningStore::RemoteTuningStore(const std::string& target, absl::Duration timeout)
    : target_(target), timeout_(timeout), channel_(MakeChannel(target)), stub_(v1::Tuner::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> RemoteTuningStore::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout_));
  return ctx;
}

absl::StatusOr<std::pair<std::string, int>> RemoteTuningStore::DaemonFormat() {
  {
    absl::MutexLock lock(&format_mu_);
    if (format_) return *format_;
  }
  auto st = DaemonStatus();
  if (!st.ok()) return st.status();
  std::pair<std::string, int> f{st->library_version(), st->topology_format() == 0 ? 1 : st->topology_format()};
  absl::MutexLock lock(&format_mu_);
  format_ = f;
  return f;
}

absl::Status RemoteTuningStore::CheckTopologyFormat(absl::string_view what) {
  auto f = DaemonFormat();
  if (!f.ok()) return f.status();
  if (f->second >= kTopologyFormat) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "hccl-tuned ", f->first, " at ", target_, " keys tables by topology fingerprint format ", f->second,
      "; this hccl-tune ", HCCL_TUNE_VERSION, " uses format ", kTopologyFormat, ", so it cannot ", what,
      " there: upgrade hccl-tuned first (a rolling upgrade upgrades the daemons before their clients), or use --db"));
}

absl::Status RemoteTuningStore::ExplainNotFound(absl::Status s) {
  if (!absl::IsNotFound(s)) return s;
  auto f = DaemonFormat();
  if (!f.ok() || f->second >= kTopologyFormat) return s;
  return absl::NotFoundError(absl::StrCat(s.message(), " (hccl-tuned ", f->first, " at ", target_,
                                          " keys tables by topology fingerprint format ", f->second,
                                          "; this hccl-tune ", HCCL_TUNE_VERSION, " names them by format ",
                                          kTopologyFormat, ": `hccl-tune show` lists the fingerprints it knows)"));
}

absl::StatusOr<int64_t> RemoteTuningStore::PutTable(const db::Topology& topology,
                                                    absl::Span<const db::TunedEntry> entries,
                                                    const db::PutOptions& options) {
  if (absl::Status s = CheckTopologyFormat("store tables"); !s.ok()) return s;
  v1::PutTableRequest req;
  req.mutable_topology()->set_fingerprint(topology.fingerprint);
  req.mutable_topology()->set_json(topology.json);
  for (const db::TunedEntry& e : entries) EntryToProto(e, req.add_entries());
  req.set_min_version(options.min_version);
  req.set_created_unix_ms(options.created_unix_ms);
  req.set_expected_version(options.expected_version);
  v1::PutTableResponse resp;
  if (absl::Status s = FromGrpc(stub_->PutTable(Context().get(), req, &resp), target_); !s.ok()) return s;
  return resp.version();
}

absl::StatusOr<db::Table> RemoteTuningStore::GetTable(absl::string_view fingerprint, int64_t version) {
  v1::GetTableRequest req;
  req.mutable_topology()->set_fingerprint(std::string(fingerprint));
  req.set_version(version);
  v1::GetTableResponse resp;
  if (absl::Status s = FromGrpc(stub_->GetTable(Context().get(), req, &resp), target_); !s.ok()) {
    return ExplainNotFound(s);
  }
  return TableFromProto(resp.table());
}

absl::StatusOr<std::optional<db::TunedEntry>> RemoteTuningStore::Lookup(absl::string_view fingerprint,
                                                                        Collective collective, DataType dtype,
                                                                        int world_size, uint64_t bytes,
                                                                        int64_t version) {
  if (version != 0) {
    auto t = GetTable(fingerprint, version);
    if (!t.ok()) return t.status();
    for (const db::TunedEntry& e : t->entries) {
      if (e.key.collective == collective && e.key.dtype == dtype && e.key.world_size == world_size &&
          e.key.range.Contains(bytes)) {
        return std::optional<db::TunedEntry>(e);
      }
    }
    return std::optional<db::TunedEntry>();
  }
  v1::GetConfigRequest req;
  req.mutable_topology()->set_fingerprint(std::string(fingerprint));
  req.set_collective(std::string(CollectiveName(collective)));
  req.set_dtype(std::string(DataTypeName(dtype)));
  req.set_world_size(world_size);
  req.set_bytes(bytes);
  v1::GetConfigResponse resp;
  if (absl::Status s = FromGrpc(stub_->GetConfig(Context().get(), req, &resp), target_); !s.ok()) {
    return ExplainNotFound(s);
  }
  if (!resp.found()) return std::optional<db::TunedEntry>();
  auto e = EntryFromProto(resp.entry());
  if (!e.ok()) return e.status();
  return std::optional<db::TunedEntry>(*std::move(e));
}

absl::StatusOr<std::vector<db::TableSummary>> RemoteTuningStore::ListTables() { return ListTablesOfClass(""); }

absl::StatusOr<std::vector<db::TableSummary>> RemoteTuningStore::ListTablesOfClass(absl::string_view topology_class) {
  if (!topology_class.empty()) {
    if (absl::Status s = db::ValidateTopologyClass(topology_class); !s.ok()) return s;
  }
  v1::ListTablesRequest req;
  req.set_topology_class(std::string(topology_class));
  v1::ListTablesResponse resp;
  if (absl::Status s = FromGrpc(stub_->ListTables(Context().get(), req, &resp), target_); !s.ok()) return s;
  std::vector<db::TableSummary> out;
  for (const v1::TableSummary& t : resp.tables()) {
    db::TableSummary summary = SummaryFromProto(t);
    // A daemon of format 1 ignores the filter: filtered here, by the class of each table's JSON.
    if (topology_class.empty() || summary.topology.topology_class == topology_class) out.push_back(std::move(summary));
  }
  return out;
}

absl::StatusOr<uint64_t> RemoteTuningStore::DeleteTable(absl::string_view fingerprint) {
  v1::DeleteTableRequest req;
  req.mutable_topology()->set_fingerprint(std::string(fingerprint));
  v1::DeleteTableResponse resp;
  if (absl::Status s = FromGrpc(stub_->DeleteTable(Context().get(), req, &resp), target_); !s.ok()) {
    return ExplainNotFound(s);
  }
  return resp.versions_deleted();
}

absl::StatusOr<int64_t> RemoteTuningStore::Rollback(absl::string_view fingerprint, int64_t to_version) {
  v1::RollbackRequest req;
  req.mutable_topology()->set_fingerprint(std::string(fingerprint));
  req.set_to_version(to_version);
  v1::RollbackResponse resp;
  if (absl::Status s = FromGrpc(stub_->Rollback(Context().get(), req, &resp), target_); !s.ok()) {
    return ExplainNotFound(s);
  }
  return resp.new_version();
}

absl::StatusOr<v1::StatusResponse> RemoteTuningStore::DaemonStatus() {
  v1::StatusResponse resp;
  if (absl::Status s = FromGrpc(stub_->Status(Context().get(), v1::StatusRequest(), &resp), target_); !s.ok()) {
    return s;
  }
  return resp;
}

absl::StatusOr<db::StoreInfo> RemoteTuningStore::Info() {
  auto st = DaemonStatus();
  if (!st.ok()) return st.status();
  db::StoreInfo info;
  info.path = st->db_path();
  info.db_bytes = st->db_bytes();
  info.schema_version = st->schema_version();
  info.tables = st->tables();
  info.entries = st->entries();
  info.live_samples = st->live_samples();
  return info;
}

absl::Status RemoteTuningStore::RecordLiveSamples(absl::string_view, absl::Span<const db::LiveSample>) {
  return NotRemote("RecordLiveSamples (use the ReportTimings stream)");
}
absl::StatusOr<std::vector<db::LiveStats>> RemoteTuningStore::GetLiveStats(absl::string_view) {
  return NotRemote("live statistics");
}
absl::Status RemoteTuningStore::PutSweep(const db::Sweep& sweep) {
  v1::PutSweepRequest req;
  SweepToProto(sweep, req.mutable_sweep());
  v1::PutSweepResponse resp;
  return FromGrpc(stub_->PutSweep(Context().get(), req, &resp), target_);
}

absl::Status RemoteTuningStore::PutLinks(const db::StoredLinks& links) {
  v1::PutLinksRequest req;
  v1::LinksRecord* r = req.mutable_links();
  r->set_fingerprint(links.fingerprint);
  r->set_links_json(links.links_json);
  r->set_measured_unix_ms(links.measured_unix_ms);
  v1::PutLinksResponse resp;
  return FromGrpc(stub_->PutLinks(Context().get(), req, &resp), target_);
}

absl::StatusOr<db::StoredLinks> RemoteTuningStore::GetLinks(absl::string_view fingerprint) {
  v1::GetLinksRequest req;
  req.set_fingerprint(std::string(fingerprint));
  v1::LinksRecord resp;
  if (absl::Status s = FromGrpc(stub_->GetLinks(Context().get(), req, &resp), target_); !s.ok()) return s;
  return db::StoredLinks{resp.fingerprint(), resp.links_json(), resp.measured_unix_ms(), resp.stored_unix_ms()};
}

namespace {

db::StoredModel ModelFromProto(const v1::ModelRecord& r) {
  return db::StoredModel{r.topology_class(), r.version(),        r.profile_json(),
                         r.source(),         r.fitted_unix_ms(), r.stored_unix_ms()};
}

}  // namespace

absl::StatusOr<int64_t> RemoteTuningStore::PutModel(const db::StoredModel& model) {
  v1::PutModelRequest req;
  v1::ModelRecord* r = req.mutable_model();
  r->set_topology_class(model.topology_class);
  r->set_profile_json(model.profile_json);
  r->set_source(model.source);
  r->set_fitted_unix_ms(model.fitted_unix_ms);
  v1::PutModelResponse resp;
  if (absl::Status s = FromGrpc(stub_->PutModel(Context().get(), req, &resp), target_); !s.ok()) return s;
  return resp.version();
}

absl::StatusOr<db::StoredModel> RemoteTuningStore::GetModel(absl::string_view topology_class, int64_t version) {
  v1::GetModelRequest req;
  req.set_topology_class(std::string(topology_class));
  req.set_version(version);
  v1::ModelRecord resp;
  if (absl::Status s = FromGrpc(stub_->GetModel(Context().get(), req, &resp), target_); !s.ok()) return s;
  return ModelFromProto(resp);
}

absl::StatusOr<std::vector<db::StoredModel>> RemoteTuningStore::ListModels() {
  v1::ListModelsResponse resp;
  if (absl::Status s = FromGrpc(stub_->ListModels(Context().get(), v1::ListModelsRequest(), &resp), target_); !s.ok()) {
    return s;
  }
  std::vector<db::StoredModel> out;
  for (const v1::ModelRecord& r : resp.models()) out.push_back(ModelFromProto(r));
  return out;
}

absl::StatusOr<db::Sweep> RemoteTuningStore::GetSweep(absl::string_view id) {
  v1::GetSweepRequest req;
  req.set_id(std::string(id));
  v1::SweepRecord resp;
  if (absl::Status s = FromGrpc(stub_->GetSweep(Context().get(), req, &resp), target_); !s.ok()) return s;
  return SweepFromProto(resp);
}

absl::StatusOr<std::vector<db::Sweep>> RemoteTuningStore::ListSweeps() {
  v1::ListSweepsResponse resp;
  if (absl::Status s = FromGrpc(stub_->ListSweeps(Context().get(), v1::ListSweepsRequest(), &resp), target_); !s.ok()) {
    return s;
  }
  std::vector<db::Sweep> out;
  for (const v1::SweepRecord& r : resp.sweeps()) {
    auto s = SweepFromProto(r);
    if (!s.ok()) return s.status();
    out.push_back(*std::move(s));
  }
  return out;
}

absl::Status RemoteTuningStore::AddSweepSamples(absl::string_view sweep_id, absl::Span<const db::SweepSample> samples) {
  // One request per call keeps "one call = one transaction"; the daemon limits a request to 65536 samples.
  if (samples.size() > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("AddSweepSamples: ", samples.size(), " samples in one call exceed the daemon's limit of 65536"));
  }
  v1::AddSweepSamplesRequest req;
  req.set_sweep_id(std::string(sweep_id));
  for (const db::SweepSample& s : samples) SweepSampleToProto(s, req.add_samples());
  v1::AddSweepSamplesResponse resp;
  return FromGrpc(stub_->AddSweepSamples(Context().get(), req, &resp), target_);
}

absl::StatusOr<std::vector<db::SweepSample>> RemoteTuningStore::GetSweepSamples(absl::string_view sweep_id) {
  v1::GetSweepSamplesRequest req;
  req.set_sweep_id(std::string(sweep_id));
  auto ctx = Context();
  auto reader = stub_->GetSweepSamples(ctx.get(), req);
  std::vector<db::SweepSample> out;
  v1::SweepSampleChunk chunk;
  absl::Status bad;
  while (reader->Read(&chunk)) {
    for (const v1::SweepSample& p : chunk.samples()) {
      auto s = SweepSampleFromProto(p);
      if (!s.ok()) {
        bad = s.status();
        continue;
      }
      out.push_back(*std::move(s));
    }
  }
  if (absl::Status s = FromGrpc(reader->Finish(), target_); !s.ok()) return s;
  if (!bad.ok()) return bad;
  return out;
}

}  // namespace hccltune::rpc

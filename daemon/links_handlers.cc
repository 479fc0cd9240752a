// TunerHandlers: link measurements and cost models (declared in daemon/handlers.h). The store validates what it
// keeps (db::ValidateLinks, db::ValidateModel); the handlers map the messages and name the RPC in their errors.
#include "absl/strings/str_cat.h"
#include "daemon/handlers.h"
#include "db/store_util.h"

namespace hccltune::daemon {
namespace {

absl::Status Named(absl::string_view rpc, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(rpc, ": ", s.message()));
}

void ModelToProto(const db::StoredModel& m, v1::ModelRecord* out) {
  out->set_topology_class(m.topology_class);
  out->set_version(m.version);
  out->set_profile_json(m.profile_json);
  out->set_source(m.source);
  out->set_fitted_unix_ms(m.fitted_unix_ms);
  out->set_stored_unix_ms(m.stored_unix_ms);
}

}  // namespace

absl::Status TunerHandlers::PutLinks(const v1::PutLinksRequest& req, v1::PutLinksResponse*) {
  const v1::LinksRecord& r = req.links();
  db::StoredLinks links{r.fingerprint(), r.links_json(), r.measured_unix_ms(), 0};
  if (absl::Status s = db::ValidateLinks(links); !s.ok()) return Named("PutLinks", s);
  return store_->PutLinks(links);
}

absl::Status TunerHandlers::GetLinks(const v1::GetLinksRequest& req, v1::LinksRecord* resp) {
  if (absl::Status s = db::ValidateFingerprint(req.fingerprint()); !s.ok()) return Named("GetLinks", s);
  auto links = store_->GetLinks(req.fingerprint());
  if (!links.ok()) return links.status();
  resp->set_fingerprint(links->fingerprint);
  resp->set_links_json(links->links_json);
  resp->set_measured_unix_ms(links->measured_unix_ms);
  resp->set_stored_unix_ms(links->stored_unix_ms);
  return absl::OkStatus();
}

absl::Status TunerHandlers::PutModel(const v1::PutModelRequest& req, v1::PutModelResponse* resp) {
  const v1::ModelRecord& r = req.model();
  db::StoredModel m{r.topology_class(), 0, r.profile_json(), r.source(), r.fitted_unix_ms(), 0};
  if (absl::Status s = db::ValidateModel(m); !s.ok()) return Named("PutModel", s);
  auto v = store_->PutModel(m);
  if (!v.ok()) return v.status();
  {
    absl::MutexLock lock(&mu_);
    ++models_generation_;
  }
  resp->set_version(*v);
  return absl::OkStatus();
}

absl::Status TunerHandlers::GetModel(const v1::GetModelRequest& req, v1::ModelRecord* resp) {
  if (absl::Status s = db::ValidateTopologyClass(req.topology_class()); !s.ok()) return Named("GetModel", s);
  auto m = store_->GetModel(req.topology_class(), req.version());
  if (!m.ok()) return m.status();
  ModelToProto(*m, resp);
  return absl::OkStatus();
}

absl::Status TunerHandlers::ListModels(const v1::ListModelsRequest&, v1::ListModelsResponse* resp) {
  auto all = store_->ListModels();
  if (!all.ok()) return all.status();
  for (const db::StoredModel& m : *all) ModelToProto(m, resp->add_models());
  return absl::OkStatus();
}

}  // namespace hccltune::daemon

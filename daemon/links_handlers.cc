// TunerHandlers: link measurements (declared in daemon/handlers.h). The store validates what it keeps
// (db::ValidateLinks); the handlers map the messages and name the RPC in their errors.
#include "absl/strings/str_cat.h"
#include "daemon/handlers.h"
#include "db/store_util.h"

namespace hccltune::daemon {
namespace {

absl::Status Named(absl::string_view rpc, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(rpc, ": ", s.message()));
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

}  // namespace hccltune::daemon

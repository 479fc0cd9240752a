#include "daemon/grpc_service.h"

#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"

namespace hccltune::daemon {

grpc::Status TunerService::Allow(const grpc::ServerContextBase* ctx, absl::string_view rpc, Caller* caller) const {
  if (auth_ == nullptr) return grpc::Status::OK;
  return ToGrpc(auth_->Check(*ctx, rpc, caller));
}

void TunerService::Audit(const Caller& caller, absl::string_view rpc, const std::string& what) {
  Log(LogLevel::kInfo, "audit: ", caller.Describe(), " ", rpc, " ", what);
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

grpc::ServerUnaryReactor* TunerService::GetTable(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::vector<grpc::Slice> slices;
  v1::GetTableRequest req;
  std::string raw;
  if (!request->Dump(&slices).ok()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "cannot read the request"));
    return reactor;
  }
  for (const grpc::Slice& s : slices) raw.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (!req.ParseFromString(raw)) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "GetTableRequest does not parse"));
    return reactor;
  }
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetTable", &caller); !d.ok()) {
    reactor->Finish(d);
    return reactor;
  }
  auto bytes = h_->GetTableBytes(req);
  if (!bytes.ok()) {
    reactor->Finish(ToGrpc(bytes.status()));
    return reactor;
  }
  grpc::Slice slice((*bytes)->data(), (*bytes)->size());
  *response = grpc::ByteBuffer(&slice, 1);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::Status TunerService::WatchTable(grpc::ServerContext* ctx, const v1::WatchTableRequest* req,
                                      grpc::ServerWriter<v1::Table>* writer) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "WatchTable", &caller); !d.ok()) return d;
  if (absl::Status s = h_->CheckWatch(*req); !s.ok()) return ToGrpc(s);
  h_->StreamStarted();
  int64_t after = req->after_version();
  if (after == 0) {
    // "0 = the current one first": anything newer than nothing.
    after = -1;
  }
  grpc::Status result = grpc::Status::OK;
  while (!ctx->IsCancelled() && !h_->shutting_down()) {
    v1::Table table;
    if (!h_->WaitForTable(*req, after, absl::Milliseconds(250), &table)) continue;
    after = table.version();
    if (!writer->Write(table)) break;  // the client went away
  }
  h_->StreamEnded();
  return result;
}

grpc::Status TunerService::GetConfig(grpc::ServerContext* ctx, const v1::GetConfigRequest* req,
                                     v1::GetConfigResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetConfig", &caller); !d.ok()) return d;
  return ToGrpc(h_->GetConfig(*req, resp));
}

grpc::Status TunerService::ReportTimings(grpc::ServerContext* ctx, grpc::ServerReader<v1::TimingBatch>* reader,
                                         v1::ReportTimingsResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "ReportTimings", &caller); !d.ok()) return d;
  h_->StreamStarted();
  v1::TimingBatch batch;
  absl::Status status;
  while (reader->Read(&batch)) {
    status = h_->ReportBatch(batch, resp, auth_ ? auth_->RoleOf(caller) : Role::kTuner);
    if (!status.ok()) break;
  }
  h_->StreamEnded();
  Log(LogLevel::kDebug, "ReportTimings from ", caller.Describe(), ": ", resp->accepted(), " samples accepted");
  return ToGrpc(status);
}

grpc::Status TunerService::PutTable(grpc::ServerContext* ctx, const v1::PutTableRequest* req,
                                    v1::PutTableResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "PutTable", &caller); !d.ok()) return d;
  absl::Status s = h_->PutTable(*req, resp);
  if (s.ok()) {
    Audit(caller, "PutTable",
          absl::StrCat("topology ", req->topology().fingerprint(), " version ", resp->version(),
                       resp->changed() ? "" : " (unchanged)"));
  }
  return ToGrpc(s);
}

grpc::Status TunerService::ListTables(grpc::ServerContext* ctx, const v1::ListTablesRequest* req,
                                      v1::ListTablesResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "ListTables", &caller); !d.ok()) return d;
  return ToGrpc(h_->ListTables(*req, resp));
}

grpc::Status TunerService::DeleteTable(grpc::ServerContext* ctx, const v1::DeleteTableRequest* req,
                                       v1::DeleteTableResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "DeleteTable", &caller); !d.ok()) return d;
  absl::Status s = h_->DeleteTable(*req, resp);
  if (s.ok()) {
    Audit(caller, "DeleteTable",
          absl::StrCat("topology ", req->topology().fingerprint(), ", ", resp->versions_deleted(), " versions"));
  }
  return ToGrpc(s);
}

grpc::Status TunerService::Rollback(grpc::ServerContext* ctx, const v1::RollbackRequest* req,
                                    v1::RollbackResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "Rollback", &caller); !d.ok()) return d;
  absl::Status s = h_->Rollback(*req, resp);
  if (s.ok()) {
    Audit(caller, "Rollback",
          absl::StrCat("topology ", req->topology().fingerprint(), " to version ", req->to_version(), " -> version ",
                       resp->new_version()));
  }
  return ToGrpc(s);
}

grpc::Status TunerService::Status(grpc::ServerContext* ctx, const v1::StatusRequest* req, v1::StatusResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "Status", &caller); !d.ok()) return d;
  return ToGrpc(h_->Status(*req, resp));
}

}  // namespace hccltune::daemon

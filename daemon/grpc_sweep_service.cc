// TunerService's sweep and link methods: thin adapters onto TunerHandlers (journal, activity, links) and
// SweepRunner.
#include "absl/strings/str_cat.h"
#include "daemon/grpc_service.h"

namespace hccltune::daemon {
namespace {

grpc::Status NoRunner() {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this hccl-tuned does not run sweeps");
}

bool IsFinal(v1::SweepProgress::State s) {
  return s == v1::SweepProgress::DONE || s == v1::SweepProgress::FAILED || s == v1::SweepProgress::CANCELLED;
}

}  // namespace

grpc::Status TunerService::PutLinks(grpc::ServerContext* ctx, const v1::PutLinksRequest* req,
                                    v1::PutLinksResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "PutLinks", &caller); !d.ok()) return d;
  absl::Status s = h_->PutLinks(*req, resp);
  if (s.ok()) Audit(caller, "PutLinks", absl::StrCat("fingerprint ", req->links().fingerprint()));
  return ToGrpc(s);
}

grpc::Status TunerService::GetLinks(grpc::ServerContext* ctx, const v1::GetLinksRequest* req, v1::LinksRecord* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetLinks", &caller); !d.ok()) return d;
  return ToGrpc(h_->GetLinks(*req, resp));
}

grpc::Status TunerService::PutModel(grpc::ServerContext* ctx, const v1::PutModelRequest* req,
                                    v1::PutModelResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "PutModel", &caller); !d.ok()) return d;
  absl::Status s = h_->PutModel(*req, resp);
  if (s.ok()) {
    Audit(caller, "PutModel", absl::StrCat("class ", req->model().topology_class(), " version ", resp->version()));
  }
  return ToGrpc(s);
}

grpc::Status TunerService::GetModel(grpc::ServerContext* ctx, const v1::GetModelRequest* req, v1::ModelRecord* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetModel", &caller); !d.ok()) return d;
  return ToGrpc(h_->GetModel(*req, resp));
}

grpc::Status TunerService::ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest* req,
                                      v1::ListModelsResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "ListModels", &caller); !d.ok()) return d;
  return ToGrpc(h_->ListModels(*req, resp));
}

grpc::Status TunerService::PutSweep(grpc::ServerContext* ctx, const v1::PutSweepRequest* req,
                                    v1::PutSweepResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "PutSweep", &caller); !d.ok()) return d;
  absl::Status s = h_->PutSweep(*req, resp);
  if (s.ok()) Audit(caller, "PutSweep", absl::StrCat("sweep ", req->sweep().id()));
  return ToGrpc(s);
}

grpc::Status TunerService::GetSweep(grpc::ServerContext* ctx, const v1::GetSweepRequest* req, v1::SweepRecord* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetSweep", &caller); !d.ok()) return d;
  return ToGrpc(h_->GetSweep(*req, resp));
}

grpc::Status TunerService::ListSweeps(grpc::ServerContext* ctx, const v1::ListSweepsRequest* req,
                                      v1::ListSweepsResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "ListSweeps", &caller); !d.ok()) return d;
  return ToGrpc(h_->ListSweeps(*req, resp));
}

grpc::Status TunerService::AddSweepSamples(grpc::ServerContext* ctx, const v1::AddSweepSamplesRequest* req,
                                           v1::AddSweepSamplesResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "AddSweepSamples", &caller); !d.ok()) return d;
  absl::Status s = h_->AddSweepSamples(*req, resp);
  if (s.ok())
    Audit(caller, "AddSweepSamples", absl::StrCat("sweep ", req->sweep_id(), ", ", resp->stored(), " samples"));
  return ToGrpc(s);
}

grpc::Status TunerService::GetSweepSamples(grpc::ServerContext* ctx, const v1::GetSweepSamplesRequest* req,
                                           grpc::ServerWriter<v1::SweepSampleChunk>* writer) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetSweepSamples", &caller); !d.ok()) return d;
  std::vector<v1::SweepSampleChunk> chunks;
  if (absl::Status s = h_->GetSweepSamples(*req, &chunks); !s.ok()) return ToGrpc(s);
  for (const v1::SweepSampleChunk& c : chunks) {
    if (!writer->Write(c)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  }
  return grpc::Status::OK;
}

grpc::Status TunerService::StartSweep(grpc::ServerContext* ctx, const v1::StartSweepRequest* req,
                                      v1::StartSweepResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "StartSweep", &caller); !d.ok()) return d;
  if (sweeps_ == nullptr) return NoRunner();
  auto id = sweeps_->Start(*req);
  if (!id.ok()) return ToGrpc(id.status());
  Audit(caller, "StartSweep", absl::StrCat("sweep ", *id));
  resp->set_sweep_id(*id);
  return grpc::Status::OK;
}

grpc::Status TunerService::WatchSweep(grpc::ServerContext* ctx, const v1::WatchSweepRequest* req,
                                      grpc::ServerWriter<v1::SweepProgress>* writer) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "WatchSweep", &caller); !d.ok()) return d;
  if (sweeps_ == nullptr) return NoRunner();
  auto id = sweeps_->Resolve(req->sweep_id());
  if (!id.ok()) return ToGrpc(id.status());
  h_->StreamStarted();
  uint64_t seq = 0;
  grpc::Status result = grpc::Status::OK;
  while (!ctx->IsCancelled()) {
    v1::SweepProgress p;
    absl::StatusOr<bool> changed = sweeps_->Wait(*id, &seq, absl::Milliseconds(250), &p);
    if (!changed.ok()) {  // evicted since Resolve: it will not come back, end the watch naming it
      result = ToGrpc(changed.status());
      break;
    }
    if (!*changed) {
      if (h_->shutting_down()) {
        result = grpc::Status(grpc::StatusCode::UNAVAILABLE, "hccl-tuned is shutting down");
        break;
      }
      continue;
    }
    if (!writer->Write(p) || IsFinal(p.state())) break;
  }
  h_->StreamEnded();
  return result;
}

grpc::Status TunerService::CancelSweep(grpc::ServerContext* ctx, const v1::CancelSweepRequest* req,
                                       v1::CancelSweepResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "CancelSweep", &caller); !d.ok()) return d;
  if (sweeps_ == nullptr) return NoRunner();
  auto id = sweeps_->Cancel(req->sweep_id());
  if (!id.ok()) return ToGrpc(id.status());
  Audit(caller, "CancelSweep", absl::StrCat("sweep ", *id));
  resp->set_sweep_id(*id);
  return grpc::Status::OK;
}

grpc::Status TunerService::GetActivity(grpc::ServerContext* ctx, const v1::GetActivityRequest* req,
                                       v1::GetActivityResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetActivity", &caller); !d.ok()) return d;
  absl::Status s = h_->GetActivity(*req, resp);
  if (s.ok() && sweeps_ != nullptr) resp->set_running_sweep_id(sweeps_->running_id());
  return ToGrpc(s);
}

}  // namespace hccltune::daemon

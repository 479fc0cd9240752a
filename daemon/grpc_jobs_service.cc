// The job view's RPCs (daemon/job_table.h): Heartbeat (the ranks), GetJobs (`hccl-tune jobs`), DumpJob
// (`hccl-tune doctor --job`). Roles in daemon/peer_auth.cc: all three are reader calls.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/grpc_service.h"
#include "runtime/common/logging.h"

namespace hccltune::daemon {
namespace {

constexpr int kDefaultDumpTimeoutMs = 5000;
constexpr int kMaxDumpTimeoutMs = 60000;

grpc::Status NoJobTable() {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "this hccl-tuned keeps no job table");
}

std::optional<uint32_t> UidOf(const Caller& caller) {
  if (!caller.has_cred) return std::nullopt;
  return static_cast<uint32_t>(caller.uid);
}

}  // namespace

grpc::Status TunerService::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                     v1::HeartbeatResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "Heartbeat", &caller); !d.ok()) return d;
  if (jobs_ == nullptr) return NoJobTable();
  auto r = jobs_->Heartbeat(*req, UidOf(caller), absl::Now());
  if (!r.ok()) return ToGrpc(r.status());
  *resp = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status TunerService::GetJobs(grpc::ServerContext* ctx, const v1::GetJobsRequest* req, v1::GetJobsResponse* resp) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "GetJobs", &caller); !d.ok()) return d;
  if (jobs_ == nullptr) return NoJobTable();
  auto r = jobs_->List(req->job_id(), absl::Now());
  if (!r.ok()) return ToGrpc(r.status());
  *resp = *std::move(r);
  resp->set_listen_port(static_cast<uint32_t>(listen_port_.load(std::memory_order_relaxed)));
  return grpc::Status::OK;
}

grpc::Status TunerService::DumpJob(grpc::ServerContext* ctx, const v1::DumpJobRequest* req,
                                   grpc::ServerWriter<v1::JobDump>* writer) {
  Caller caller;
  if (grpc::Status d = Allow(ctx, "DumpJob", &caller); !d.ok()) return d;
  if (jobs_ == nullptr) return NoJobTable();
  if (req->timeout_ms() < 0 || req->timeout_ms() > kMaxDumpTimeoutMs) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("DumpJob: timeout_ms ", req->timeout_ms(),
                                                                         " is not from 0 to ", kMaxDumpTimeoutMs));
  }
  const bool privileged = auth_ == nullptr || !caller.tls_subject.empty() || auth_->RoleOf(caller) == Role::kTuner;
  const int timeout_ms = req->timeout_ms() == 0 ? kDefaultDumpTimeoutMs : req->timeout_ms();
  auto dumps = jobs_->Dump(req->job_id(), UidOf(caller), privileged, absl::Milliseconds(timeout_ms));
  if (!dumps.ok()) return ToGrpc(dumps.status());
  Log(LogLevel::kInfo, caller.Describe(), " DumpJob ", req->job_id(), ": ", dumps->size(), " answers");
  for (const v1::JobDump& d : *dumps) {
    if (!writer->Write(d)) break;  // the client went away
  }
  return grpc::Status::OK;
}

}  // namespace hccltune::daemon

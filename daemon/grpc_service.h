// The gRPC side of hccltune.v1.Tuner: thin adapters from grpc::Service methods onto TunerHandlers, and the
// absl -> grpc status mapping (codes map 1:1). Each method first checks the caller's role
// (daemon/peer_auth.h); each successful write logs an audit line ("audit: uid U pid P RPC what"). No other logic.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>

#include "absl/status/status.h"
#include "daemon/handlers.h"
#include "daemon/job_table.h"
#include "daemon/peer_auth.h"
#include "daemon/sweep_runner.h"
#include "hccltune/v1/tuner.grpc.pb.h"

namespace hccltune::daemon {

grpc::Status ToGrpc(const absl::Status& s);
absl::Status FromGrpc(const grpc::Status& s);

// GetTable is served with the callback API on raw bytes (the cached serialized reply); the rest is synchronous.
class TunerService final : public v1::Tuner::WithRawCallbackMethod_GetTable<v1::Tuner::Service> {
 public:
  // `sweeps` may be null: then StartSweep/WatchSweep/CancelSweep answer FAILED_PRECONDITION.
  // `auth` may be null: then every caller may call every RPC (tests that build the service without a server).
  explicit TunerService(TunerHandlers* handlers, SweepRunner* sweeps = nullptr, const Authorizer* auth = nullptr)
      : h_(handlers), sweeps_(sweeps), auth_(auth) {}

  grpc::ServerUnaryReactor* GetTable(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::Status WatchTable(grpc::ServerContext* ctx, const v1::WatchTableRequest* req,
                          grpc::ServerWriter<v1::Table>* writer) override;
  grpc::Status GetConfig(grpc::ServerContext*, const v1::GetConfigRequest* req, v1::GetConfigResponse* resp) override;
  grpc::Status ReportTimings(grpc::ServerContext* ctx, grpc::ServerReader<v1::TimingBatch>* reader,
                             v1::ReportTimingsResponse* resp) override;
  grpc::Status PutTable(grpc::ServerContext*, const v1::PutTableRequest* req, v1::PutTableResponse* resp) override;
  grpc::Status ListTables(grpc::ServerContext*, const v1::ListTablesRequest* req,
                          v1::ListTablesResponse* resp) override;
  grpc::Status DeleteTable(grpc::ServerContext*, const v1::DeleteTableRequest* req,
                           v1::DeleteTableResponse* resp) override;
  grpc::Status Rollback(grpc::ServerContext*, const v1::RollbackRequest* req, v1::RollbackResponse* resp) override;
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest* req, v1::StatusResponse* resp) override;

  // Sweep journal, daemon-run sweeps and activity (daemon/grpc_sweep_service.cc).
  grpc::Status PutSweep(grpc::ServerContext*, const v1::PutSweepRequest* req, v1::PutSweepResponse* resp) override;
  grpc::Status GetSweep(grpc::ServerContext*, const v1::GetSweepRequest* req, v1::SweepRecord* resp) override;
  grpc::Status ListSweeps(grpc::ServerContext*, const v1::ListSweepsRequest* req,
                          v1::ListSweepsResponse* resp) override;
  grpc::Status AddSweepSamples(grpc::ServerContext*, const v1::AddSweepSamplesRequest* req,
                               v1::AddSweepSamplesResponse* resp) override;
  grpc::Status GetSweepSamples(grpc::ServerContext*, const v1::GetSweepSamplesRequest* req,
                               grpc::ServerWriter<v1::SweepSampleChunk>* writer) override;
  grpc::Status StartSweep(grpc::ServerContext*, const v1::StartSweepRequest* req,
                          v1::StartSweepResponse* resp) override;
  grpc::Status WatchSweep(grpc::ServerContext* ctx, const v1::WatchSweepRequest* req,
                          grpc::ServerWriter<v1::SweepProgress>* writer) override;
  grpc::Status CancelSweep(grpc::ServerContext*, const v1::CancelSweepRequest* req,
                           v1::CancelSweepResponse* resp) override;
  grpc::Status GetActivity(grpc::ServerContext*, const v1::GetActivityRequest* req,
                           v1::GetActivityResponse* resp) override;
  grpc::Status PutLinks(grpc::ServerContext*, const v1::PutLinksRequest* req, v1::PutLinksResponse* resp) override;
  grpc::Status GetLinks(grpc::ServerContext*, const v1::GetLinksRequest* req, v1::LinksRecord* resp) override;
  grpc::Status PutModel(grpc::ServerContext*, const v1::PutModelRequest* req, v1::PutModelResponse* resp) override;
  grpc::Status GetModel(grpc::ServerContext*, const v1::GetModelRequest* req, v1::ModelRecord* resp) override;
  grpc::Status ListModels(grpc::ServerContext*, const v1::ListModelsRequest* req,
                          v1::ListModelsResponse* resp) override;

  // The job view (daemon/grpc_jobs_service.cc over daemon/job_table.h); FAILED_PRECONDITION without a job table.
  void set_jobs(JobTable* jobs) { jobs_ = jobs; }
  // The TCP listener's port, which GetJobs reports (`doctor --job` asks the other nodes' daemons on it).
  void set_listen_port(int port) { listen_port_.store(port, std::memory_order_relaxed); }
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::Status GetJobs(grpc::ServerContext* ctx, const v1::GetJobsRequest* req, v1::GetJobsResponse* resp) override;
  grpc::Status DumpJob(grpc::ServerContext* ctx, const v1::DumpJobRequest* req,
                       grpc::ServerWriter<v1::JobDump>* writer) override;

 private:
  // The caller of `ctx` into `*caller`, and whether it may call `rpc` (daemon/peer_auth.h).
  grpc::Status Allow(const grpc::ServerContextBase* ctx, absl::string_view rpc, Caller* caller) const;
  // The audit log line of a write: who, which RPC, what it changed (which version).
  static void Audit(const Caller& caller, absl::string_view rpc, const std::string& what);

  TunerHandlers* const h_;
  SweepRunner* const sweeps_;
  const Authorizer* const auth_;
  JobTable* jobs_ = nullptr;
  std::atomic<int> listen_port_{0};  // set once the server started (calls may already run)
};

}  // namespace hccltune::daemon

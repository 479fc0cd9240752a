// RemoteTuningStore: the table part of the TuningStore contract, served by hccl-tuned over gRPC. Tools take a
// TuningStore& and work the same on a daemon (`--daemon TARGET`) and on a file (`--db PATH`). Sweeps (rows and raw
// samples), link measurements and cost models go to the daemon's database; live statistics are not offered remotely
// (Unimplemented: the runtime streams them with ReportTimings); the daemon's own Status is DaemonStatus().
//
// Mixed versions: tables are keyed by topology fingerprint format 2. A daemon of format 1 (StatusResponse without
// topology_format) is refused writes of tables (PutTable: FailedPrecondition naming both versions — its format-1
// clients would never find them), its NotFound answers say which format it keys by, and the class of its tables
// is computed here from their JSON.
//
// Thread-safety: safe from any thread (a gRPC channel and stub).
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "db/tuning_store.h"
#include "hccltune/v1/tuner.grpc.pb.h"

namespace hccltune::rpc {

class RemoteTuningStore final : public db::TuningStore {
 public:
  // `target` is a gRPC target ("unix:/path", "host:port"); every call fails after `timeout`.
  RemoteTuningStore(const std::string& target, absl::Duration timeout = absl::Seconds(10));

  absl::StatusOr<int64_t> PutTable(const db::Topology& topology, absl::Span<const db::TunedEntry> entries,
                                   const db::PutOptions& options) override;
  absl::StatusOr<db::Table> GetTable(absl::string_view fingerprint, int64_t version) override;
  absl::StatusOr<std::optional<db::TunedEntry>> Lookup(absl::string_view fingerprint, Collective collective,
                                                       DataType dtype, int world_size, uint64_t bytes,
                                                       int64_t version) override;
  absl::StatusOr<std::vector<db::TableSummary>> ListTables() override;
  absl::StatusOr<std::vector<db::TableSummary>> ListTablesOfClass(absl::string_view topology_class) override;
  absl::StatusOr<uint64_t> DeleteTable(absl::string_view fingerprint) override;
  absl::StatusOr<int64_t> Rollback(absl::string_view fingerprint, int64_t to_version) override;
  absl::Status RecordLiveSamples(absl::string_view fingerprint, absl::Span<const db::LiveSample> samples) override;
  absl::StatusOr<std::vector<db::LiveStats>> GetLiveStats(absl::string_view fingerprint) override;
  absl::Status PutSweep(const db::Sweep& sweep) override;
  absl::StatusOr<db::Sweep> GetSweep(absl::string_view id) override;
  absl::StatusOr<std::vector<db::Sweep>> ListSweeps() override;
  absl::Status AddSweepSamples(absl::string_view sweep_id, absl::Span<const db::SweepSample> samples) override;
  absl::StatusOr<std::vector<db::SweepSample>> GetSweepSamples(absl::string_view sweep_id) override;
  absl::Status PutLinks(const db::StoredLinks& links) override;
  absl::StatusOr<db::StoredLinks> GetLinks(absl::string_view fingerprint) override;
  absl::StatusOr<int64_t> PutModel(const db::StoredModel& model) override;
  absl::StatusOr<db::StoredModel> GetModel(absl::string_view topology_class, int64_t version) override;
  absl::StatusOr<std::vector<db::StoredModel>> ListModels() override;
  absl::StatusOr<db::StoreInfo> Info() override;

  absl::StatusOr<v1::StatusResponse> DaemonStatus();
  // OK when the daemon keys tables by this build's topology format (asked once); FailedPrecondition naming the
  // daemon's version and format and this build's when it keys them by an older one, saying what `what` needs.
  absl::Status CheckTopologyFormat(absl::string_view what);
  v1::Tuner::Stub& stub() { return *stub_; }
  const std::string& target() const { return target_; }

 private:
  std::unique_ptr<grpc::ClientContext> Context() const;
  // The daemon's library version and topology format (1 for daemons that do not say), asked once.
  absl::StatusOr<std::pair<std::string, int>> DaemonFormat();
  // `s` (NotFound for a topology), with a word on the daemon's format when it keys tables by an older one.
  absl::Status ExplainNotFound(absl::Status s);

  const std::string target_;
  const absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tuner::Stub> stub_;
  absl::Mutex format_mu_;
  std::optional<std::pair<std::string, int>> format_ ABSL_GUARDED_BY(format_mu_);
};

}  // namespace hccltune::rpc

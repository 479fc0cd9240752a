// TunerHandlers: the logic of the hccltune.v1.Tuner service, free of gRPC plumbing (daemon/grpc_service.h
// adapts it), so it is tested by calling methods. Every method validates its request and returns an absl::Status
// whose code maps 1:1 onto the gRPC code.
//
// The latest version of each table is cached in memory (GetTable and GetConfig do not touch SQLite), and
// invalidated by every write made through these handlers. WaitForTable blocks a WatchTable stream until a newer
// version exists.
//
// Topology fingerprints: tables are keyed by format 2 (runtime/common/fingerprint.h). A request of a client of
// format 1 names its topology by the format-1 fingerprint and JSON: it is served from the format-2 key, the JSON
// translated; a format-1 fingerprint sent alone (a CLI's lookup) is matched against the format-1 fingerprints of
// the stored topologies. Both translations are remembered.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/activity.h"
#include "daemon/live_ingest.h"
#include "daemon/peer_auth.h"
#include "db/tuning_store.h"
#include "hccltune/v1/tuner.pb.h"

namespace hccltune::daemon {

namespace v1 = ::hccltune::v1;

struct HandlerLimits {
  int max_batch_samples = 65536;
  int max_table_entries = static_cast<int>(db::kMaxTableEntries);
};

class TunerHandlers {
 public:
  // `store` and `ingest` must outlive the handlers.
  TunerHandlers(db::TuningStore* store, LiveIngest* ingest, HandlerLimits limits = {});

  absl::Status GetTable(const v1::GetTableRequest& req, v1::GetTableResponse* resp);
  // The same reply, serialized: the latest version's bytes are built once per version and shared, so serving a
  // 1,000-entry table costs a memcpy, not a proto copy and serialization per call.
  absl::StatusOr<std::shared_ptr<const std::string>> GetTableBytes(const v1::GetTableRequest& req);
  absl::Status GetConfig(const v1::GetConfigRequest& req, v1::GetConfigResponse* resp);
  absl::Status PutTable(const v1::PutTableRequest& req, v1::PutTableResponse* resp);
  absl::Status ListTables(const v1::ListTablesRequest& req, v1::ListTablesResponse* resp);
  absl::Status DeleteTable(const v1::DeleteTableRequest& req, v1::DeleteTableResponse* resp);
  absl::Status Rollback(const v1::RollbackRequest& req, v1::RollbackResponse* resp);
  absl::Status Status(const v1::StatusRequest& req, v1::StatusResponse* resp);
  // ReportTimings batches refused as bad input so far (ReportBatch errors).
  uint64_t report_errors() const { return report_errors_.load(std::memory_order_relaxed); }
  // One batch of a ReportTimings stream from a caller of role `reporter`; adds to the totals in `resp`.
  absl::Status ReportBatch(const v1::TimingBatch& batch, v1::ReportTimingsResponse* resp,
                           Role reporter = Role::kReader);

  // Sweep journal (daemon/sweep_handlers.cc): hccl-tune sweep's rows and raw samples in the daemon's database.
  absl::Status PutSweep(const v1::PutSweepRequest& req, v1::PutSweepResponse* resp);
  absl::Status GetSweep(const v1::GetSweepRequest& req, v1::SweepRecord* resp);
  absl::Status ListSweeps(const v1::ListSweepsRequest& req, v1::ListSweepsResponse* resp);
  absl::Status AddSweepSamples(const v1::AddSweepSamplesRequest& req, v1::AddSweepSamplesResponse* resp);
  // The sweep's samples in chunks of at most `chunk` samples (each chunk well under the message limit).
  absl::Status GetSweepSamples(const v1::GetSweepSamplesRequest& req, std::vector<v1::SweepSampleChunk>* chunks,
                               int chunk = 16384);
  // Link measurements (daemon/links_handlers.cc): the newest link table per topology.
  absl::Status PutLinks(const v1::PutLinksRequest& req, v1::PutLinksResponse* resp);
  absl::Status GetLinks(const v1::GetLinksRequest& req, v1::LinksRecord* resp);
  // Cost models (daemon/links_handlers.cc): a fitted profile per topology class, versioned by the store. A new
  // model does not replace predicted tables already served; topologies first asked for after it get its predictions.
  absl::Status PutModel(const v1::PutModelRequest& req, v1::PutModelResponse* resp);
  absl::Status GetModel(const v1::GetModelRequest& req, v1::ModelRecord* resp);
  absl::Status ListModels(const v1::ListModelsRequest& req, v1::ListModelsResponse* resp);
  // Tuning clients that reported live timings within the request's window.
  absl::Status GetActivity(const v1::GetActivityRequest& req, v1::GetActivityResponse* resp);
  // Receives every accepted batch of live samples (canonical configurations) besides the ingest queue, with the
  // reporter's role — the online policy (daemon/online_policy.h). Set before serving; must be cheap and
  // thread-safe.
  using LiveObserver =
      std::function<void(const std::string& fingerprint, absl::Span<const db::LiveSample>, Role reporter)>;
  void SetLiveObserver(LiveObserver observer) { observer_ = std::move(observer); }
  // Called with a table's fingerprint after every write of it made through these handlers (a new version, a
  // rollback, a deletion), outside the handlers' locks. Set before serving.
  using ChangeObserver = std::function<void(const std::string& fingerprint)>;
  void SetChangeObserver(ChangeObserver observer) { change_observer_ = std::move(observer); }
  // Reported by Status (exports_dir); set before serving.
  void SetExportsDir(std::string dir) { exports_dir_ = std::move(dir); }

  // The daemon's own writes (online policy, mini-sweeps): stores `entries` as the topology's new version with
  // `options` (a compare-and-swap when options.expected_version is set: Aborted when the table changed), then
  // refreshes the caches and wakes WatchTable streams like PutTable. Returns the version.
  absl::StatusOr<int64_t> Publish(const db::Topology& topology, const std::vector<db::TunedEntry>& entries,
                                  const db::PutOptions& options);
  // Who reported live timings when (GetActivity's source; the mini-sweeps' idle rule).
  ActivityTracker& activity() { return activity_; }

  // Validates a WatchTable request.
  absl::Status CheckWatch(const v1::WatchTableRequest& req);
  // Waits up to `timeout` for a version of the table newer than `after_version`; fills `out` and returns true when
  // there is one. Returns false on timeout or after Shutdown().
  bool WaitForTable(const v1::WatchTableRequest& req, int64_t after_version, absl::Duration timeout, v1::Table* out);

  // Ends every WaitForTable (streams finish) and refuses new streams.
  void Shutdown();
  bool shutting_down() const { return shutting_down_.load(); }

  // Streams in progress (WatchTable and ReportTimings): the "connected clients" of Status.
  void StreamStarted() { ++streams_; }
  void StreamEnded() { --streams_; }

 private:
  absl::Status AcceptBatch(const v1::TimingBatch& batch, v1::ReportTimingsResponse* resp, Role reporter);
  // The latest table of a topology, from the cache or the store. NotFound when there is none.
  absl::StatusOr<std::shared_ptr<const db::Table>> Latest(const std::string& fingerprint);
  // Latest, but a topology with no table whose class has a cost model (and whose JSON the request carried) first
  // gets the table the model predicts (daemon/predicted_table.h), stored as its first version. NotFound as Latest
  // when nothing can be predicted.
  absl::StatusOr<std::shared_ptr<const db::Table>> LatestOrPredicted(const db::Topology& topology);
  // Stores the predicted table of `topology`; an error says why there is none.
  absl::Status Predict(const db::Topology& topology);
  // The key a request's topology is stored under, with its JSON in the current format when the request had one
  // (see the file comment). Errors: an invalid fingerprint, a JSON that does not hash to it, a format this build
  // does not read.
  absl::StatusOr<db::Topology> Resolve(const v1::Topology& topology);
  // The stored topology whose format-1 fingerprint is `fingerprint`, if any (remembered in legacy_).
  std::optional<db::Topology> FindFormat1(const std::string& fingerprint);
  void Remember(const std::string& format1_fingerprint, const db::Topology& current);
  // Drops the cached table and wakes watchers.
  void Changed(const std::string& fingerprint);
  absl::StatusOr<std::string> CanonicalConfiguration(const std::string& text);

  db::TuningStore* const store_;
  LiveIngest* const ingest_;
  const HandlerLimits limits_;
  LiveObserver observer_;
  std::atomic<uint64_t> report_errors_{0};
  ChangeObserver change_observer_;
  std::string exports_dir_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> streams_{0};

  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const db::Table>> cache_ ABSL_GUARDED_BY(mu_);
  // The GetTable reply per (fingerprint, world size), built once per version.
  std::map<std::pair<std::string, int>, std::pair<int64_t, std::shared_ptr<const std::string>>> reply_cache_
      ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every change; watchers wait on it
  // Topologies for which nothing could be predicted, with the models_generation_ of that verdict (a new model
  // lets them try again). Bounded.
  std::map<std::string, uint64_t> unpredictable_ ABSL_GUARDED_BY(mu_);
  uint64_t models_generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every PutModel

  ActivityTracker activity_;

  absl::Mutex legacy_mu_;
  // Format-1 fingerprint -> the stored (format-2) topology: what Resolve translated. Bounded.
  std::map<std::string, db::Topology> legacy_ ABSL_GUARDED_BY(legacy_mu_);

  absl::Mutex config_mu_;
  absl::flat_hash_map<std::string, std::string> canonical_ ABSL_GUARDED_BY(config_mu_);  // bounded
};

}  // namespace hccltune::daemon

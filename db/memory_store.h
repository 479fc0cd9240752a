// InMemoryTuningStore: the TuningStore contract held in process memory (tests, and tools that need no file).
// Thread-safety: every method takes one mutex.
#pragma once

#include <map>
#include <memory>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "db/store_util.h"
#include "db/tuning_store.h"

namespace hccltune::db {

class InMemoryTuningStore final : public TuningStore {
 public:
  explicit InMemoryTuningStore(StoreOptions options = {});

  absl::StatusOr<int64_t> PutTable(const Topology& topology, absl::Span<const TunedEntry> entries,
                                   const PutOptions& options) override;
  absl::StatusOr<Table> GetTable(absl::string_view fingerprint, int64_t version) override;
  absl::StatusOr<std::optional<TunedEntry>> Lookup(absl::string_view fingerprint, Collective collective, DataType dtype,
                                                   int world_size, uint64_t bytes, int64_t version) override;
  absl::StatusOr<std::vector<TableSummary>> ListTables() override;
  absl::StatusOr<std::vector<TableSummary>> ListTablesOfClass(absl::string_view topology_class) override;
  absl::StatusOr<uint64_t> DeleteTable(absl::string_view fingerprint) override;
  absl::StatusOr<int64_t> Rollback(absl::string_view fingerprint, int64_t to_version) override;
  absl::Status RecordLiveSamples(absl::string_view fingerprint, absl::Span<const LiveSample> samples) override;
  absl::StatusOr<std::vector<LiveStats>> GetLiveStats(absl::string_view fingerprint) override;
  absl::Status PutSweep(const Sweep& sweep) override;
  absl::StatusOr<Sweep> GetSweep(absl::string_view id) override;
  absl::StatusOr<std::vector<Sweep>> ListSweeps() override;
  absl::Status AddSweepSamples(absl::string_view sweep_id, absl::Span<const SweepSample> samples) override;
  absl::StatusOr<std::vector<SweepSample>> GetSweepSamples(absl::string_view sweep_id) override;
  absl::Status PutLinks(const StoredLinks& links) override;
  absl::StatusOr<StoredLinks> GetLinks(absl::string_view fingerprint) override;
  absl::StatusOr<int64_t> PutModel(const StoredModel& model) override;
  absl::StatusOr<StoredModel> GetModel(absl::string_view topology_class, int64_t version) override;
  absl::StatusOr<std::vector<StoredModel>> ListModels() override;
  absl::StatusOr<StoreInfo> Info() override;

 private:
  struct TopologyState {
    std::string json;
    std::string topology_class;
    int64_t next_version = 1;
    std::map<int64_t, Table> versions;
  };
  struct SweepState {
    Sweep sweep;
    std::vector<SweepSample> samples;
  };
  // (collective, dtype, world, bucket min, configuration)
  using LiveKey = std::tuple<Collective, DataType, int, uint64_t, std::string>;

  absl::StatusOr<int64_t> PutLocked(TopologyState& state, const std::string& fingerprint,
                                    std::vector<TunedEntry> sorted, const PutOptions& options)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every table (topology_class empty) or those of one class.
  std::vector<TableSummary> ListLocked(absl::string_view topology_class) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const Table*> FindLocked(absl::string_view fingerprint, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Samples only for the newest max_sweeps_with_samples sweeps, `written` and any sweep marked running.
  void TrimSweepSamplesLocked(const SweepState& written) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StoreOptions options_;
  absl::Mutex mu_;
  std::map<std::string, TopologyState, std::less<>> topologies_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<LiveKey, LiveDelta>, std::less<>> live_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, SweepState, std::less<>> sweeps_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, StoredLinks, std::less<>> links_ ABSL_GUARDED_BY(mu_);
  // Class -> version -> model.
  std::map<std::string, std::map<int64_t, StoredModel>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace hccltune::db

// TuningStore: the node's memory of what is fast.
//
// Content:
//  - Tuned tables, one per topology fingerprint, each with its topology's JSON and class. A table holds entries keyed
//  by (collective, dtype, world size,
//    byte range [min, max)) with the winning configuration (canonical string) and its measurements. Every change
//    to a table creates a new version (numbers only grow, also across DeleteTable); older versions are kept up to
//    StoreOptions::max_versions so Rollback can restore one (as a new version with the old content).
//  - Live statistics per (topology, collective, dtype, world size, power-of-two size bucket, configuration):
//    count, mean, median/p90 from a log-scale histogram, last seen.
//  - The newest link-inspector measurement per topology (StoredLinks).
//  - Sweeps (id, parameters, status, progress, times) and their raw samples, kept for the newest
//    StoreOptions::max_sweeps_with_samples sweeps by start time, for every sweep marked running and for the
//    sweep being written (a resumed sweep keeps its first start time).
//
// Implementations: SqliteTuningStore (db/sqlite_store.h) and InMemoryTuningStore (db/memory_store.h); one
// conformance suite (tests/unit/db/tuning_store_conformance_test.cc) runs against both.
//
// Errors: InvalidArgument for bad input (unknown names, overlapping or inverted ranges, absurd sizes),
// NotFound for an unknown topology or version, FailedPrecondition for a database this build cannot use.
// Thread-safety: every implementation is safe to call from several threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"

namespace hccltune::db {

// Sizes above this (other than an open upper end) are refused as absurd: 1 PiB.
inline constexpr uint64_t kMaxBytes = 1ull << 50;
inline constexpr int kMaxWorldSize = 1 << 20;
// What one table and one text field may hold; every store refuses more, naming the limit.
inline constexpr size_t kMaxTableEntries = 100000;
inline constexpr size_t kMaxTextBytes = 4096;               // a configuration, sweep id, version string
inline constexpr size_t kMaxTopologyJsonBytes = 64u << 10;  // a topology's canonical JSON
inline constexpr size_t kMaxSweepJsonBytes = 1u << 20;      // a sweep's parameters JSON, its message
inline constexpr size_t kMaxLinksJsonBytes = 3u << 20;      // a link table's JSON (under gRPC's 4 MiB)

struct Topology {
  std::string fingerprint;  // 16 lower-case hex digits: SHA-256 prefix of `json`
  std::string json;         // canonical JSON (docs/CONVENTIONS.md, Topology fingerprint); may be empty on lookups
  // 16 lower-case hex digits: SHA-256 prefix of the topology class JSON (the same without nodes and ranks per
  // node). Stores fill it on reads from the JSON they hold; writes need not set it.
  std::string topology_class;
};

struct EntryKey {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int world_size = 1;
  ByteRange range;

  friend bool operator==(const EntryKey&, const EntryKey&) = default;
};

struct TunedEntry {
  EntryKey key;
  std::string configuration;  // canonical string of the winner
  double time_us = 0;         // median, max over ranks
  double busbw_gbps = 0;
  uint64_t samples = 0;
  std::string runner_up;      // canonical string, empty when none
  double margin = 0;          // runner-up time / winner time - 1
  double default_margin = 0;  // built-in default time / winner time - 1
  std::string sweep_id;
  std::string library_version;
  int64_t measured_unix_ms = 0;
  // Online tuning (daemon/online_policy.h). `rank_time_us`: the sweep's per-rank median, the baseline live
  // samples are compared with (0 = not recorded: time_us stands in). `stale`: live timings regressed against
  // the baseline. An exploration plan, when `explore` is set: of the calls this entry covers, one in
  // `explore_every` runs `explore` instead of the winner, at most `explore_calls` times per table version.
  double rank_time_us = 0;
  bool stale = false;
  std::string explore;  // canonical string, empty = no plan
  uint32_t explore_every = 0;
  uint32_t explore_calls = 0;
  // Where the entry came from: 0 = measured (a sweep, the online policy); N > 0 = predicted by version N of the
  // cost model stored for the topology's class (StoredModel), never measured.
  int64_t model_version = 0;

  friend bool operator==(const TunedEntry&, const TunedEntry&) = default;
};

struct Table {
  Topology topology;
  int64_t version = 0;
  std::string content_hash;  // SHA-256 hex over the canonical entry list (db/table_codec.h)
  int64_t created_unix_ms = 0;
  std::vector<TunedEntry> entries;  // sorted by key (collective, dtype, world, min)
};

struct TableSummary {
  Topology topology;
  int64_t latest_version = 0;
  std::vector<int64_t> versions;  // ascending
  uint64_t entries = 0;           // in the latest version
  int64_t updated_unix_ms = 0;
};

struct PutOptions {
  // The new version is at least this (import keeps the exported version number in a fresh store).
  int64_t min_version = 0;
  // 0 = now.
  int64_t created_unix_ms = 0;
  // Compare and swap: when not 0, the write happens only while the topology's latest version is this one
  // (-1: while it has no table); otherwise Aborted naming both versions and nothing is written. A
  // read-modify-write (hccl-tuned's online policy and mini-sweeps) re-reads and retries on Aborted.
  int64_t expected_version = 0;
};

// One live sample: a per-rank call duration (docs/CONVENTIONS.md, Timing).
struct LiveSample {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int world_size = 1;
  uint64_t bytes = 0;
  std::string configuration;  // stored as given: callers pass the canonical string
  double duration_us = 0;
  int64_t unix_ms = 0;
};

struct LiveStats {
  std::string fingerprint;
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int world_size = 1;
  ByteRange bucket;  // [2^k, 2^(k+1)); [0, 1) for zero bytes
  std::string configuration;
  uint64_t count = 0;
  double mean_us = 0;
  double median_us = 0;
  double p90_us = 0;
  int64_t last_seen_unix_ms = 0;
};

enum class SweepStatus : uint8_t { kPending, kRunning, kDone, kFailed, kCancelled };
absl::string_view SweepStatusName(SweepStatus s);
absl::StatusOr<SweepStatus> ParseSweepStatus(absl::string_view name);

struct Sweep {
  std::string id;
  std::string params_json;
  SweepStatus status = SweepStatus::kPending;
  double progress = 0;  // 0..1
  int64_t started_unix_ms = 0;
  int64_t finished_unix_ms = 0;  // 0 while running
  std::string message;

  friend bool operator==(const Sweep&, const Sweep&) = default;
};

// The process running a sweep, for its row's params_json ("owner"): this boot of this machine (boot_id), its pid
// namespace, its pid and that pid's start time — enough to tell later whether that very process still runs.
std::string ThisProcessOwnerJson();

// Whether the row names an owner that ran on this boot of this machine, in this pid namespace, and that process
// is gone: exited, killed (a zombie not yet reaped counts), or its pid now names another process. False whenever
// it cannot tell (no owner recorded, another host or boot or container).
bool SweepOwnerGone(const Sweep& s);

// Whether a journal row says a sweep is in progress at `now_unix_ms`: marked running, started less than 6 h ago,
// and its owner not known to be gone (a sweep killed with SIGKILL leaves its row running: on its own machine the
// dead owner shows it at once, elsewhere the 6 h horizon). One rule for `hccl-tune sweep`'s busy check and the
// daemon's mini-sweeps.
bool SweepInProgress(const Sweep& s, int64_t now_unix_ms);

// One raw measurement of a sweep.
struct SweepSample {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int world_size = 1;
  uint64_t bytes = 0;
  std::string configuration;
  double time_us = 0;       // max over ranks
  double rank_time_us = 0;  // per-rank statistic, comparable with live samples
  int iteration = 0;

  friend bool operator==(const SweepSample&, const SweepSample&) = default;
};

// A link inspector's results for one topology (links/link_inspector.h writes and reads the JSON: {"ranks": N,
// "links": [...]}). A topology keeps its newest measurement: storing one replaces the one before.
struct StoredLinks {
  std::string fingerprint;       // the topology measured (16 hex digits)
  std::string links_json;        // an object with an integer "ranks" >= 2 and a "links" array
  int64_t measured_unix_ms = 0;  // when the measurement ended (> 0)
  int64_t stored_unix_ms = 0;    // set by the store

  friend bool operator==(const StoredLinks&, const StoredLinks&) = default;
};

// A cost model fitted for one topology class (model/profile.h's JSON). Each PutModel of a class stores the next
// version (numbers only grow); every version is kept, so a model version named by predicted entries stays readable.
struct StoredModel {
  std::string topology_class;  // 16 lower-case hex digits
  int64_t version = 0;         // set by the store
  std::string profile_json;    // a JSON object (the model layer reads it)
  std::string source;          // what it was fitted from, for people ("sweeps s1 s2"); at most kMaxTextBytes
  int64_t fitted_unix_ms = 0;  // > 0
  int64_t stored_unix_ms = 0;  // set by the store

  friend bool operator==(const StoredModel&, const StoredModel&) = default;
};

struct StoreInfo {
  std::string path;  // empty for the in-memory store
  uint64_t db_bytes = 0;
  int schema_version = 0;
  uint64_t tables = 0;
  uint64_t entries = 0;  // over the latest versions
  uint64_t live_samples = 0;
};

struct StoreOptions {
  int max_versions = 16;            // versions kept per topology (>= 2)
  int max_sweeps_with_samples = 8;  // raw samples are kept for this many newest sweeps (and running ones)
  int busy_timeout_ms = 5000;       // SQLite
};

class TuningStore {
 public:
  virtual ~TuningStore() = default;

  // --- tables ---
  // Stores `entries` as the new content of the topology's table. The topology JSON is required the first time
  // a fingerprint is stored, must hash to the fingerprint and be canonical JSON of the current format
  // (runtime/common/fingerprint.h): format 1 is refused, so whoever reads it (hccl-tuned from older clients,
  // import from older files) translates it first (CanonicalTopology). Identical content to the latest version is not a
  // change: the latest version number is returned and nothing is written. Returns the table's version.
  virtual absl::StatusOr<int64_t> PutTable(const Topology& topology, absl::Span<const TunedEntry> entries,
                                           const PutOptions& options) = 0;
  // version 0 = latest. NotFound when the topology or version is unknown.
  virtual absl::StatusOr<Table> GetTable(absl::string_view fingerprint, int64_t version) = 0;
  // The entry whose key matches and whose range holds `bytes`, in `version` (0 = latest); nullopt when none.
  virtual absl::StatusOr<std::optional<TunedEntry>> Lookup(absl::string_view fingerprint, Collective collective,
                                                           DataType dtype, int world_size, uint64_t bytes,
                                                           int64_t version) = 0;
  virtual absl::StatusOr<std::vector<TableSummary>> ListTables() = 0;
  // The tables whose topology is of class `topology_class` (16 hex digits, else InvalidArgument), by fingerprint.
  virtual absl::StatusOr<std::vector<TableSummary>> ListTablesOfClass(absl::string_view topology_class) = 0;
  // Removes every version; returns how many. NotFound when the topology has no table.
  virtual absl::StatusOr<uint64_t> DeleteTable(absl::string_view fingerprint) = 0;
  // Makes the content of `to_version` (0 = the one before the latest) the new latest version; returns it.
  virtual absl::StatusOr<int64_t> Rollback(absl::string_view fingerprint, int64_t to_version) = 0;

  // --- live statistics ---
  // Adds samples, all in one transaction.
  virtual absl::Status RecordLiveSamples(absl::string_view fingerprint, absl::Span<const LiveSample> samples) = 0;
  virtual absl::StatusOr<std::vector<LiveStats>> GetLiveStats(absl::string_view fingerprint) = 0;

  // --- sweeps ---
  virtual absl::Status PutSweep(const Sweep& sweep) = 0;  // insert or update
  virtual absl::StatusOr<Sweep> GetSweep(absl::string_view id) = 0;
  virtual absl::StatusOr<std::vector<Sweep>> ListSweeps() = 0;  // newest first
  virtual absl::Status AddSweepSamples(absl::string_view sweep_id, absl::Span<const SweepSample> samples) = 0;
  virtual absl::StatusOr<std::vector<SweepSample>> GetSweepSamples(absl::string_view sweep_id) = 0;

  // --- link measurements ---
  // Stores `links` (ValidateLinks) as the topology's newest link table, stamped with the time of storing.
  virtual absl::Status PutLinks(const StoredLinks& links) = 0;
  // NotFound naming the fingerprint when nothing was stored for it.
  virtual absl::StatusOr<StoredLinks> GetLinks(absl::string_view fingerprint) = 0;

  // --- cost models ---
  // Stores `model` (ValidateModel; its version is ignored) as the next version of its class; returns the version.
  virtual absl::StatusOr<int64_t> PutModel(const StoredModel& model) = 0;
  // version 0 = latest. NotFound naming the class (and version) when there is none.
  virtual absl::StatusOr<StoredModel> GetModel(absl::string_view topology_class, int64_t version) = 0;
  // The latest version of every class, by class.
  virtual absl::StatusOr<std::vector<StoredModel>> ListModels() = 0;

  virtual absl::StatusOr<StoreInfo> Info() = 0;
};

}  // namespace hccltune::db

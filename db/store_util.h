// Logic shared by every TuningStore implementation, so they agree by construction: input validation, the
// canonical entry order, the content hash, live-statistics histograms and size buckets.
//
// Thread-safety: pure functions; LatencyHistogram is a value.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "db/tuning_store.h"
#include "runtime/common/fingerprint.h"

namespace hccltune::db {

// Lower-case hex SHA-256 of `data`.
using ::hccltune::Sha256Hex;

// InvalidArgument "WHAT of N bytes is over the limit of LIMIT bytes" when `text` is longer than `limit`.
absl::Status CheckTextBytes(absl::string_view text, size_t limit, absl::string_view what);

// OK when `fingerprint` is 16 lower-case hex digits.
absl::Status ValidateFingerprint(absl::string_view fingerprint);
// OK when `topology_class` is 16 lower-case hex digits.
absl::Status ValidateTopologyClass(absl::string_view topology_class);
// What a store checks of a topology it stores for the first time: the JSON is non-empty, hashes to the
// fingerprint (the first 16 hex digits of its SHA-256) and is canonical JSON of the current format. Returns the
// topology's class.
absl::StatusOr<std::string> ValidateTopology(const Topology& topology);

// Checks every entry (world size, sizes, configurations parse) and that no two ranges of one
// (collective, dtype, world) overlap. Returns the entries sorted in canonical order with configuration strings
// in canonical form.
absl::StatusOr<std::vector<TunedEntry>> NormalizeEntries(absl::Span<const TunedEntry> entries);
// What a store checks of a link table: the fingerprint, the JSON's size (kMaxLinksJsonBytes) and shape (an
// object with an integer "ranks" in [2, kMaxWorldSize] and an array "links"), a measurement time > 0.
absl::Status ValidateLinks(const StoredLinks& links);
// A model to store: a valid class, a JSON object of at most kMaxTopologyJsonBytes, a source of at most
// kMaxTextBytes, a fitting time > 0.
absl::Status ValidateModel(const StoredModel& model);
// The NotFound every store returns for a class without a model (version 0) or without that version.
absl::Status ModelNotFound(absl::string_view topology_class, int64_t version);

// Canonical order: collective, dtype, world size, range min.
bool EntryKeyLess(const EntryKey& a, const EntryKey& b);

// SHA-256 hex over the canonical serialization of sorted entries (what Table::content_hash holds).
std::string ContentHash(absl::Span<const TunedEntry> sorted_entries);

// The largest table version a write may ask for (PutOptions::min_version): 2^53, exact in a double and in any
// JSON reader. Versions then grow by one per change, far from int64's end.
inline constexpr int64_t kMaxTableVersion = int64_t{1} << 53;
// InvalidArgument naming the value when PutOptions::min_version is outside [0, kMaxTableVersion].
absl::Status ValidatePutOptions(const PutOptions& options);
// Everything PutTable checks before it looks at what the store holds: the fingerprint, the topology JSON against
// it when given, the entries (NormalizeEntries), the options. Returns the entries in canonical order. (The
// topology JSON may be empty only for a topology the store already has.)
absl::StatusOr<std::vector<TunedEntry>> ValidatePut(const Topology& topology, absl::Span<const TunedEntry> entries,
                                                    const PutOptions& options);
// The version a change gets: max(next_version, min_version); FailedPrecondition when the stored next version is
// out of range (written before versions were bounded), where adding one would overflow.
absl::StatusOr<int64_t> NewVersion(absl::string_view fingerprint, int64_t next_version, const PutOptions& options);

// PutOptions::expected_version against the topology's latest version (0 = no table): Aborted when they differ.
absl::Status CheckExpectedVersion(absl::string_view fingerprint, int64_t latest, const PutOptions& options);

// The entry of `sorted_entries` matching the key and holding `bytes`, or nullptr.
const TunedEntry* FindEntry(absl::Span<const TunedEntry> sorted_entries, Collective collective, DataType dtype,
                            int world_size, uint64_t bytes);

absl::Status ValidateLiveSample(const LiveSample& s);
absl::Status ValidateSweepSample(const SweepSample& s);
absl::Status ValidateSweep(const Sweep& s);

// The power-of-two bucket of a byte count: [2^k, 2^(k+1)); [0, 1) for 0.
ByteRange SizeBucket(uint64_t bytes);

int64_t NowUnixMs();

// Log-scale latency histogram: bucket i holds [kBase * 2^(i/8), kBase * 2^((i+1)/8)) microseconds, so a
// quantile is within ~4.5% of the true value. Bucket 0 also takes anything smaller, the last anything larger.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 192;
  static constexpr double kBase = 0.01;  // us; the last bucket starts at ~168 s

  void Add(double us, uint64_t n = 1);
  void Merge(const LatencyHistogram& other);
  uint64_t Count() const;
  // q in [0, 1]; 0 when empty. The geometric middle of the bucket holding the q-quantile.
  double Quantile(double q) const;

  // Fixed-size little-endian encoding (kBuckets * 8 bytes); Decode of anything else is an error.
  std::string Encode() const;
  static absl::StatusOr<LatencyHistogram> Decode(absl::string_view blob);

 private:
  std::array<uint64_t, kBuckets> counts_{};
};

// Aggregate of samples for one live-stats key, before it is merged into the store.
struct LiveDelta {
  uint64_t count = 0;
  double sum_us = 0;
  int64_t last_seen_unix_ms = 0;
  LatencyHistogram histogram;
};

}  // namespace hccltune::db

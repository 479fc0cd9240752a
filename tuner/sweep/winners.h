// From measured points to tuned-table entries: the winner per size, adjacent sizes with the same winner merged
// into one byte range (the crossovers between ranges are where the winner changes), each entry with its
// runner-up, the margin over it and the margin over the built-in default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "tuner/sweep/search.h"

namespace hccltune::sweep {

struct EntryContext {
  int world_size = 1;
  uint64_t min_bytes = 0;  // the requested range, inclusive at both ends
  uint64_t max_bytes = 0;
  std::string sweep_id;
  std::string library_version;
  int64_t measured_unix_ms = 0;
  // When set, each (collective, dtype) covers exactly this range instead (SweepSpec::exact_range).
  std::optional<ByteRange> exact_range;
};

// `results` sorted by (collective, dtype, bytes) as the sweep measures them. The entries of one (collective,
// dtype) cover [min_bytes, max(max_bytes + 1, 2 × the largest measured size)) without gaps: a measured size s
// covers [s, next measured size), the first one from min_bytes. time/busbw/margins are those of the range's
// first size, as is rank_time_us (the median of the winner's per-rank times); margins are clamped at 0 (a measured
// runner-up is never better than the winner by median).
std::vector<db::TunedEntry> BuildEntries(const std::vector<PointResult>& results, const EntryContext& ctx);

// The latest table of the topology with the entries of `fresh` merged in: where a fresh entry's range overlaps an
// existing entry of the same (collective, dtype, world size), the existing entry keeps only its parts outside the
// fresh ranges (split at their bounds, every other field as it was); everything else is kept as it is.
std::vector<db::TunedEntry> MergeEntries(const std::vector<db::TunedEntry>& existing,
                                         const std::vector<db::TunedEntry>& fresh);

// Stores MergeEntries(latest table, fresh) as the topology's new version with a compare-and-swap on the version
// read: a version published meanwhile (hccl-tuned's online policy, a mini-sweep) is re-read and merged into,
// never overwritten. Returns the stored version; Aborted after `attempts` lost races. Thread-safe as `store` is.
absl::StatusOr<int64_t> PutMerged(db::TuningStore& store, const db::Topology& topology,
                                  const std::vector<db::TunedEntry>& fresh, int attempts = 8);

}  // namespace hccltune::sweep

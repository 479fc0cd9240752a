#include "tuner/sweep/winners.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace hccltune::sweep {

std::vector<db::TunedEntry> BuildEntries(const std::vector<PointResult>& results, const EntryContext& ctx) {
  std::vector<db::TunedEntry> out;
  for (size_t i = 0; i < results.size(); ++i) {
    const PointResult& r = results[i];
    if (r.winner < 0) continue;
    const bool group_start =
        i == 0 || results[i - 1].point.collective != r.point.collective || results[i - 1].point.dtype != r.point.dtype;
    const bool group_end = i + 1 == results.size() || results[i + 1].point.collective != r.point.collective ||
                           results[i + 1].point.dtype != r.point.dtype;
    const CandidateResult& w = r.candidates[static_cast<size_t>(r.winner)];
    uint64_t lo = group_start ? std::min(ctx.min_bytes, r.point.bytes) : r.point.bytes;
    uint64_t hi =
        group_end ? std::max(ctx.max_bytes + 1, std::max<uint64_t>(2 * r.point.bytes, 1)) : results[i + 1].point.bytes;
    if (ctx.exact_range && group_start) lo = ctx.exact_range->min;
    if (ctx.exact_range && group_end) hi = ctx.exact_range->max;
    if (!group_start && !out.empty() && out.back().configuration == w.config) {
      out.back().key.range.max = hi;  // same winner as the size before: extend its range
      out.back().samples += w.time_us.size();
      continue;
    }
    db::TunedEntry e;
    e.key.collective = r.point.collective;
    e.key.dtype = r.point.dtype;
    e.key.world_size = ctx.world_size;
    e.key.range = ByteRange{lo, hi};
    e.configuration = w.config;
    e.time_us = w.stat.median;
    // The per-rank median next to the max-over-ranks one: the online policy compares live samples (per-rank
    // call durations) with it (docs/CONVENTIONS.md, Timing).
    if (!w.rank_time_us.empty()) e.rank_time_us = MedianWithCI(w.rank_time_us).median;
    const double algbw = w.stat.median > 0 ? static_cast<double>(r.point.bytes) / w.stat.median / 1e3 : 0;
    e.busbw_gbps = algbw * BusBandwidthFactor(r.point.collective, ctx.world_size);
    e.samples = w.time_us.size();
    if (r.runner_up >= 0) {
      const CandidateResult& ru = r.candidates[static_cast<size_t>(r.runner_up)];
      e.runner_up = ru.config;
      e.margin = w.stat.median > 0 ? std::max(0.0, ru.stat.median / w.stat.median - 1) : 0;
    }
    if (r.default_index >= 0 && w.stat.median > 0) {
      e.default_margin =
          std::max(0.0, r.candidates[static_cast<size_t>(r.default_index)].stat.median / w.stat.median - 1);
    }
    e.sweep_id = ctx.sweep_id;
    e.library_version = ctx.library_version;
    e.measured_unix_ms = ctx.measured_unix_ms;
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<db::TunedEntry> MergeEntries(const std::vector<db::TunedEntry>& existing,
                                         const std::vector<db::TunedEntry>& fresh) {
  std::vector<db::TunedEntry> out;
  for (const db::TunedEntry& old : existing) {
    // The fresh ranges of the same key that overlap this entry, in order; what lies between them stays old.
    std::vector<ByteRange> cuts;
    for (const db::TunedEntry& f : fresh) {
      if (f.key.collective == old.key.collective && f.key.dtype == old.key.dtype &&
          f.key.world_size == old.key.world_size && f.key.range.min < old.key.range.max &&
          old.key.range.min < f.key.range.max) {
        cuts.push_back(f.key.range);
      }
    }
    std::sort(cuts.begin(), cuts.end(), [](const ByteRange& a, const ByteRange& b) { return a.min < b.min; });
    uint64_t from = old.key.range.min;  // the start of the part not yet covered by a fresh range
    for (const ByteRange& cut : cuts) {
      if (cut.min > from) {
        db::TunedEntry piece = old;
        piece.key.range = ByteRange{from, cut.min};
        out.push_back(std::move(piece));
      }
      from = std::max(from, cut.max);
    }
    if (from < old.key.range.max) {
      db::TunedEntry piece = old;
      piece.key.range = ByteRange{from, old.key.range.max};
      out.push_back(std::move(piece));
    }
  }
  out.insert(out.end(), fresh.begin(), fresh.end());
  return out;
}

absl::StatusOr<int64_t> PutMerged(db::TuningStore& store, const db::Topology& topology,
                                  const std::vector<db::TunedEntry>& fresh, int attempts) {
  for (int i = 0; i < attempts; ++i) {
    std::vector<db::TunedEntry> existing;
    int64_t read = -1;  // no table yet
    auto current = store.GetTable(topology.fingerprint, 0);
    if (current.ok()) {
      existing = current->entries;
      read = current->version;
    } else if (!absl::IsNotFound(current.status())) {
      return current.status();
    }
    db::PutOptions options;
    options.expected_version = read;
    auto v = store.PutTable(topology, MergeEntries(existing, fresh), options);
    if (!absl::IsAborted(v.status())) return v;
  }
  return absl::AbortedError(absl::StrCat("table ", topology.fingerprint, " changed under each of ", attempts,
                                         " attempts to merge the winners into it"));
}

}  // namespace hccltune::sweep

// `hccl-tune sweep` on one rank of a communicator: candidates from the registry, the search of
// tuner/sweep/search.h run on real collectives, samples and progress kept as it goes, winners at the end.
//
// Roles: rank 0 drives. It owns the spec (broadcast to every rank at the start, so all ranks build the same
// candidate lists), decides what to measure next and broadcasts each command; the other ranks follow. Times are
// the maximum over ranks (an allreduce after each batch), so rank 0 sees what every rank would. Only rank 0
// touches the journal (sweep row + raw samples); at the end rank 0 broadcasts the winners so that every node's
// first local rank can hand them to its own node's store (launched mode over several nodes).
//
// Storage contract: samples of a batch are one transaction (AddSweepSamples) and the progress is updated when a
// candidate finishes, so a killed sweep loses at most one batch; the winners are written with one PutTable (one
// transaction) at the end, so no half-written table is ever visible. Resume replays the kept samples through
// the same deterministic search, then continues measuring.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "runtime/api/communicator.h"
#include "tuner/sweep/search.h"

namespace hccltune::sweep {

struct SweepSpec {
  std::vector<Collective> collectives = {Collective::kAllreduce};
  std::vector<DataType> dtypes = {DataType::kFloat32};
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 64ull << 20;
  int step = 2;                         // size factor between measured sizes (a power of two >= 2)
  std::vector<std::string> algorithms;  // empty = every valid one
  std::vector<std::string> links;       // empty = shm and tcp on one node, the inter-node networks otherwise
  // `--range LO-HI`: the winners cover exactly [LO, HI) (an open HI: [LO, no end)) instead of the measured sizes'
  // natural ranges, so they can replace one entry of a table (hccl-tuned's mini-sweep). min_bytes is LO and
  // max_bytes below HI then.
  std::optional<ByteRange> exact_range;
  SearchOptions search;

  std::string ToJson() const;
  static absl::StatusOr<SweepSpec> FromJson(absl::string_view json);
  // InvalidArgument naming what is wrong: empty/inverted size range, bad step, collectives without a choice.
  absl::Status Validate() const;
};

// The measured sizes: powers of two in [min_bytes, max_bytes], `step` apart.
std::vector<uint64_t> SweepSizes(const SweepSpec& spec);

struct RankZeroIo {
  db::TuningStore* journal = nullptr;  // sweeps + samples (required)
  db::TuningStore* tables = nullptr;   // winners (required)
  std::string sweep_id;                // new sweep, or the one to resume
  bool resume = false;                 // continue `sweep_id` from its kept samples (its spec wins)
  const std::atomic<bool>* stop = nullptr;
  std::function<void(const Progress&)> on_progress;
  bool store_table = true;  // false (--no-table): the winners are only returned (and printed), not stored
};

struct SweepOutcome {
  std::string sweep_id;
  SweepSpec spec;
  std::vector<PointResult> results;
  std::vector<db::TunedEntry> entries;  // the winners of this sweep (every rank gets them)
  SearchStats stats;
  int64_t table_version = 0;         // rank 0: the table version written (0 with store_table false)
  uint64_t replayed_iterations = 0;  // resume: iterations taken from the journal
  double seconds = 0;
};

// Resume: batches already in the journal (`kept`) are returned from it, in order; the rest is measured by `live`.
// Used by RunSweep and the peer runtimes' sweep (tuner/peers/peer_sweep.h).
class ReplayMeasurer final : public Measurer {
 public:
  using Key = std::tuple<int, int, uint64_t, std::string>;
  ReplayMeasurer(Measurer* live, const std::vector<db::SweepSample>& kept) : live_(live) {
    for (const auto& s : kept) {
      auto& v = kept_[Key{static_cast<int>(s.collective), static_cast<int>(s.dtype), s.bytes, s.configuration}];
      v.time_us.push_back(s.time_us);
      v.rank_time_us.push_back(s.rank_time_us);
    }
  }
  absl::StatusOr<Batch> Measure(const Point& p, const std::string& config, int iters, int warmup) override {
    auto it = kept_.find(Key{static_cast<int>(p.collective), static_cast<int>(p.dtype), p.bytes, config});
    size_t& pos = cursor_[Key{static_cast<int>(p.collective), static_cast<int>(p.dtype), p.bytes, config}];
    if (it != kept_.end() && pos + static_cast<size_t>(iters) <= it->second.time_us.size()) {
      Batch b;
      b.time_us.assign(it->second.time_us.begin() + static_cast<ptrdiff_t>(pos),
                       it->second.time_us.begin() + static_cast<ptrdiff_t>(pos) + iters);
      b.rank_time_us.assign(it->second.rank_time_us.begin() + static_cast<ptrdiff_t>(pos),
                            it->second.rank_time_us.begin() + static_cast<ptrdiff_t>(pos) + iters);
      pos += static_cast<size_t>(iters);
      last_replayed = true;
      replayed += static_cast<uint64_t>(iters);
      return b;
    }
    last_replayed = false;
    return live_->Measure(p, config, iters, warmup);
  }
  bool last_replayed = false;
  uint64_t replayed = 0;

 private:
  Measurer* live_;
  std::map<Key, Batch> kept_;
  std::map<Key, size_t> cursor_;
};

// Every rank calls it; `spec` and `io` matter only on rank 0. Cancelled when *io.stop became true (the sweep
// row is then marked cancelled, resumable).
absl::StatusOr<SweepOutcome> RunSweep(Communicator& comm, const SweepSpec& spec, const RankZeroIo& io);

// A head-to-head re-measurement of two configurations of one point: blocks of a few iterations alternate
// between them (A B, then B A, ...), each pair of blocks gives one ratio median(B) / median(A), and the result is
// the median of those ratios with its distribution-free 95% CI. Load and drift then cancel within each pair
// instead of landing between candidates measured seconds apart.
struct PairedCheck {
  std::string a, b;  // a = the best re-measured candidate, b = the stored winner
  MedianCI ratio;    // of b's time to a's
  int pairs = 0;
};

// Measures every candidate of each point (rank 0's list) with `spec`'s search and no storage: `hccl-tune verify`.
// Every rank calls it; the results are complete on rank 0 (empty elsewhere). When `stored` (rank 0: the stored
// winner per point) and `paired` are given, every point whose stored winner is more than 5% behind the best by
// the medians is re-measured head to head against it (`paired` gets one PairedCheck per point, pairs = 0 where
// none was needed or the stored winner is not a candidate here).
absl::StatusOr<std::vector<PointResult>> MeasurePoints(Communicator& comm, const SweepSpec& spec,
                                                       const std::vector<Point>& points,
                                                       const std::vector<std::string>* stored = nullptr,
                                                       std::vector<PairedCheck>* paired = nullptr);

// A new sweep id: sw-YYYYMMDD-HHMMSS-XXXX.
std::string NewSweepId();

// Checks that the node is quiet enough for a sweep: the 1-minute load average against the CPUs, and sweeps the
// journal lists as running (other than `own_id`). Returns a warning ("" = quiet) and whether it is serious
// enough to refuse without --force.
struct QuietCheck {
  std::string warning;
  bool refuse = false;
};
QuietCheck CheckNodeQuiet(db::TuningStore* journal, const std::string& own_id);

// Before `--resume`: FailedPrecondition when the sweep's row is marked running and its owner still runs it (an
// owner on this machine that is not gone, whenever the sweep started; an owner that cannot be told, within
// db::SweepInProgress's 6 h of the start), naming the owner's pid and saying to wait or pass --force if it
// really died; OK otherwise (RunSweep itself refuses a sweep that is done).
absl::Status CheckResumable(const db::Sweep& row, int64_t now_unix_ms);

}  // namespace hccltune::sweep

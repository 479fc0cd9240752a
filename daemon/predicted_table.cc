#include "daemon/predicted_table.h"

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "hccltune/version.h"
#include "model/simulate.h"

namespace hccltune::daemon {
namespace {

constexpr uint64_t kFirstSize = 8;
constexpr uint64_t kLastSize = 64ull << 20;

// One entry per dtype for the winner of sizes[first..last] (inclusive) of one collective.
void AddRange(Collective c, int world, const model::CollectivePrediction& p, size_t first, size_t last,
              int64_t model_version, int64_t now_ms, std::vector<db::TunedEntry>& out) {
  const model::SizePrediction& at = p.sizes[first];
  db::TunedEntry e;
  e.key.collective = c;
  e.key.world_size = world;
  e.key.range.min = first == 0 ? 0 : at.bytes;
  e.key.range.max = last + 1 == p.sizes.size() ? kUnbounded : p.sizes[last + 1].bytes;
  e.configuration = at.ranked[0].config;
  e.time_us = at.ranked[0].seconds * 1e6;
  if (at.ranked.size() > 1 && at.ranked[0].seconds > 0) {
    e.runner_up = at.ranked[1].config;
    e.margin = at.ranked[1].seconds / at.ranked[0].seconds - 1;
  }
  e.sweep_id = absl::StrCat("model:", model_version);
  e.library_version = HCCL_TUNE_VERSION;
  e.measured_unix_ms = now_ms;
  e.model_version = model_version;
  for (DataType t : AllDataTypes()) {
    e.key.dtype = t;
    out.push_back(e);
  }
}

}  // namespace

absl::StatusOr<std::vector<db::TunedEntry>> PredictTable(const model::ClusterProfile& profile, int64_t model_version,
                                                         const model::Shape& shape) {
  if (shape.nodes > 1 && !profile.inter_known) {
    return absl::FailedPreconditionError(
        absl::StrCat("model ", profile.name, " never measured a network between nodes"));
  }
  std::vector<Collective> colls;
  for (Collective c : AllCollectives()) {
    if (c != Collective::kSendRecv) colls.push_back(c);
  }
  const int64_t now_ms = db::NowUnixMs();
  std::vector<db::TunedEntry> out;
  for (const model::CollectivePrediction& p : model::Simulate(profile, shape, colls, kFirstSize, kLastSize)) {
    size_t first = 0;
    for (size_t i = 0; i < p.sizes.size(); ++i) {
      const bool ends = i + 1 == p.sizes.size() || p.sizes[i + 1].ranked.empty() || p.sizes[i].ranked.empty() ||
                        p.sizes[i + 1].ranked[0].config != p.sizes[i].ranked[0].config;
      if (!ends) continue;
      if (!p.sizes[first].ranked.empty())
        AddRange(p.collective, shape.ranks(), p, first, i, model_version, now_ms, out);
      first = i + 1;
    }
  }
  return out;
}

}  // namespace hccltune::daemon

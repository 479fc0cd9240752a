#include "daemon/predicted_table.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "db/store_util.h"
#include "hccltune/version.h"
#include "model/simulate.h"
#include "model/table_choice.h"

namespace hccltune::daemon {
namespace {

constexpr uint64_t kFirstSize = 8;
constexpr uint64_t kLastSize = 64ull << 20;

// One entry per dtype for sizes[first..last] (inclusive) of one collective, served `choice` (at sizes[first]).
void AddRange(Collective c, int world, const model::CollectivePrediction& p, const model::TableChoice& choice,
              size_t first, size_t last, int64_t model_version, int64_t now_ms, std::vector<db::TunedEntry>& out) {
  const model::SizePrediction& at = p.sizes[first];
  db::TunedEntry e;
  e.key.collective = c;
  e.key.world_size = world;
  e.key.range.min = first == 0 ? 0 : at.bytes;
  e.key.range.max = last + 1 == p.sizes.size() ? kUnbounded : p.sizes[last + 1].bytes;
  e.configuration = choice.chosen.config;
  e.time_us = choice.chosen.seconds * 1e6;
  // The runner-up: the model's fastest where the default was kept (margin 0, as a sweep's margins are never
  // negative: the online policy explores it if the default regresses live), else the model's second.
  const model::Candidate* runner = choice.kept_default ? &choice.fastest : nullptr;
  if (runner == nullptr && at.ranked.size() > 1) runner = &at.ranked[1];
  if (runner != nullptr && choice.chosen.seconds > 0) {
    e.runner_up = runner->config;
    e.margin = std::max(0.0, runner->seconds / choice.chosen.seconds - 1);
  }
  if (choice.builtin.seconds > 0 && choice.chosen.seconds > 0) {
    e.default_margin = choice.builtin.seconds / choice.chosen.seconds - 1;
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

// Each size's choice (empty optional where no candidate is valid), then one range per run of the same choice.
void AddCollective(const model::ClusterProfile& profile, const model::Shape& shape,
                   const model::CollectivePrediction& p, int64_t model_version, int64_t now_ms,
                   std::vector<db::TunedEntry>& out) {
  std::vector<std::optional<model::TableChoice>> choices;
  for (const model::SizePrediction& s : p.sizes) {
    choices.push_back(s.ranked.empty()
                          ? std::nullopt
                          : std::optional(model::ChooseForTable(profile, p.collective, shape, s.bytes, s.ranked)));
  }
  size_t first = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const bool ends = i + 1 == choices.size() || !choices[i] || !choices[i + 1] ||
                      choices[i + 1]->chosen.config != choices[i]->chosen.config;
    if (!ends) continue;
    if (choices[first]) AddRange(p.collective, shape.ranks(), p, *choices[first], first, i, model_version, now_ms, out);
    first = i + 1;
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
    AddCollective(profile, shape, p, model_version, now_ms, out);
  }
  return out;
}

}  // namespace hccltune::daemon

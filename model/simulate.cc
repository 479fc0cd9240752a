#include "model/simulate.h"

#include "absl/strings/str_cat.h"
#include "runtime/common/configuration.h"
#include "runtime/common/sizes.h"

namespace hccltune::model {

std::vector<CollectivePrediction> Simulate(const ClusterProfile& profile, const Shape& shape,
                                           absl::Span<const Collective> collectives, uint64_t min_bytes,
                                           uint64_t max_bytes) {
  std::vector<CollectivePrediction> out;
  for (Collective c : collectives) {
    CollectivePrediction p{c, {}};
    for (uint64_t b = min_bytes; b <= max_bytes && b != 0; b *= 2) {
      p.sizes.push_back({b, RankCandidates(profile, c, shape, b)});
      if (b > max_bytes / 2) break;
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string AlgorithmOf(const std::string& config) { return config.substr(0, config.find('(')); }

std::string PricedName(const std::string& config) {
  auto c = Configuration::Parse(config);
  if (!c.ok()) return AlgorithmOf(config);
  if (c->algorithm == "chain") return absl::StrCat("chain(chunk=", FormatBytes(c->chunk), ")");
  if (c->algorithm != "hierarchical" || c->inter == nullptr) return c->algorithm;
  const std::string form = c->form == HierForm::kAuto ? "" : absl::StrCat(",form=", HierFormName(c->form));
  return absl::StrCat("hierarchical(inter=", c->inter->algorithm, form, ")");
}

std::vector<WinnerRange> Crossovers(const CollectivePrediction& p) {
  std::vector<WinnerRange> out;
  for (const SizePrediction& s : p.sizes) {
    if (s.ranked.empty()) continue;
    const std::string alg = AlgorithmOf(s.ranked.front().config);
    if (!out.empty() && out.back().algorithm == alg) {
      out.back().to = s.bytes;
    } else {
      out.push_back({alg, s.bytes, s.bytes});
    }
  }
  return out;
}

}  // namespace hccltune::model

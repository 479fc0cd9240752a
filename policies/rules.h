// Configuration rules as data: per collective, byte ranges (and, for the built-in defaults, world-size
// ranges) mapped to configurations. Two textual sources share these types:
//
//   HCCL_TUNE_ALGO (ParseTuneAlgo):  allreduce:0-64K=one_shot,64K-=ring(chunk=1M)/allgather:0-=ring
//   the built-in defaults (ParseRuleTable), one rule per line, with an optional node-count range after the world:
//       # collective  world  [nodes=N]  bytes   configuration
//       allreduce     2-8               0-32K   recursive_doubling
//       allgather     2-8    nodes=2-   64K-    ring(chunk=1M)
//
// and HCCL_ALGO (ParseHcclAlgo), HCCL's own grammar, mapped onto our names per docs/CONVENTIONS.md.
// Parse errors name the source, the position and what was expected. Lookups are pure and cheap.
//
// Thread-safety: values; const methods may be called concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/configuration.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"

namespace hccltune::policies {

struct Rule {
  Collective collective = Collective::kAllreduce;
  int min_world = 1;        // inclusive
  int max_world = 1 << 30;  // inclusive
  int min_nodes = 1;        // inclusive: the number of nodes the group spans
  int max_nodes = 1 << 30;  // inclusive
  ByteRange bytes;          // [min, max)
  Configuration config;
  // Whether the rule speaks of a group of `world` ranks on `nodes` nodes (any size).
  bool Applies(int world, int nodes) const {
    return world >= min_world && world <= max_world && nodes >= min_nodes && nodes <= max_nodes;
  }
};

class RuleSet {
 public:
  // First rule (in order) matching a group of `world` ranks on `nodes` nodes; nullptr when none.
  const Configuration* Find(Collective c, int world, uint64_t bytes, int nodes = 1) const;
  bool Covers(Collective c) const { return !rules_[static_cast<size_t>(c)].empty(); }
  bool empty() const;
  void Add(Rule r) { rules_[static_cast<size_t>(r.collective)].push_back(std::move(r)); }
  const std::vector<Rule>& RulesFor(Collective c) const { return rules_[static_cast<size_t>(c)]; }

 private:
  std::array<std::vector<Rule>, kNumCollectives> rules_;
};

// HCCL_TUNE_ALGO. Empty text gives an empty set. Sizes take K, M and G only (SizeSuffixes::kConventions); a
// collective given twice and overlapping ranges of one collective are errors (first match wins, so an overlap
// would leave part of a rule unreachable).
absl::StatusOr<RuleSet> ParseTuneAlgo(absl::string_view text);
// The rule-table format above; `source` names it in errors.
absl::StatusOr<RuleSet> ParseRuleTable(absl::string_view text, absl::string_view source);

// HCCL_ALGO: "level0:NA;level1:H-D_R" for every collective, or per collective
// "allreduce=level0:NA;level1:ring/allgather=level0:NA;level1:H-D_R". Names map: ring -> ring,
// H-D_R -> halving_doubling, pipeline -> hierarchical, NA -> no preference; NHR, NHR_V1, NB, AHC are refused,
// and so is a collective or a level given twice, and pipeline at level0 (HCCL's pipeline runs between nodes;
// inside a node it would nest hierarchical in hierarchical).
struct HcclLevels {
  std::optional<std::string> level0;  // our algorithm name; nullopt = no preference
  std::optional<std::string> level1;
};
struct HcclAlgo {
  std::optional<HcclLevels> all;                               // applies to every collective
  std::array<std::optional<HcclLevels>, kNumCollectives> per;  // explicit per-collective settings win
  bool empty() const;
  const HcclLevels* For(Collective c) const;
};
absl::StatusOr<HcclAlgo> ParseHcclAlgo(absl::string_view text);

// The built-in defaults shipped with this release (policies/defaults.cc), parsed once.
const RuleSet& BuiltinDefaults();
// Their text, for `hccl-tune algorithms --defaults` and tests.
absl::string_view BuiltinDefaultsText();

}  // namespace hccltune::policies

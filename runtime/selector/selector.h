// The selector: which configuration a collective call runs, decided in-process with no RPC, in precedence
// order (docs/CONVENTIONS.md):
//   1. a configuration passed on the call
//   2. HCCL_TUNE_ALGO (per collective and byte range)
//   3. HCCL_ALGO (HCCL's level0/level1 names, mapped to ours)
//   4. the tuned table (from the node's daemon, identical on every rank)
//   5. the built-in defaults (policies/defaults.cc)
// Whatever the user did not pin stays automatic. Every input above is identical on every rank (checked at
// communicator init, and the table is distributed by rank 0), so every rank chooses the same configuration.
//
// Thread-safety: Choose() is const and may run concurrently with nothing else mutating; SetTable() is called
// by the communicator between calls (under its call lock).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "policies/rules.h"
#include "runtime/algorithms/algorithm.h"
#include "runtime/common/config.h"
#include "runtime/common/configuration.h"
#include "runtime/common/sizes.h"
#include "runtime/common/types.h"

namespace hccltune {

// One tuned entry: (collective, dtype, world size, byte range) -> configuration.
struct TunedEntry {
  Collective collective = Collective::kAllreduce;
  DataType dtype = DataType::kFloat32;
  int world_size = 0;
  ByteRange bytes;
  Configuration config;
  // Exploration plan (set by the daemon's online policy): of the calls this entry decides, the
  // explore_every-th, 2*explore_every-th, ... run `explore` instead, at most explore_calls times while the
  // table is installed. Empty = none.
  std::optional<Configuration> explore;
  uint32_t explore_every = 0;
  uint32_t explore_calls = 0;
  // 0: measured; N > 0: predicted by version N of the cost model (the choice's source is then `predicted`).
  int64_t model_version = 0;
};

// A topology's tuned table as the daemon serves it.
struct TunedTable {
  int64_t version = 0;
  std::string content_hash;
  std::vector<TunedEntry> entries;

  // A compact text form used to hand the table to every rank (one entry per line; its model version and its plan,
  // when it has them, on lines after it).
  std::string Serialize() const;
  static absl::StatusOr<TunedTable> Deserialize(absl::string_view text);
};

// kTable: a measured entry of the tuned table; kPredicted: an entry the cost model predicted (docs/MODEL.md).
enum class ChoiceSource : uint8_t { kCall, kTuneAlgo, kHcclAlgo, kTable, kDefault, kExplore, kPredicted };
absl::string_view ChoiceSourceName(ChoiceSource s);

class Selector {
 public:
  // Parses HCCL_TUNE_ALGO and HCCL_ALGO from `env`; an override naming an algorithm the collective does not
  // have is an error naming the variable, and so is an HCCL_TUNE_ALGO rule that cannot run on this topology
  // (symmetric on several nodes; a hierarchical form this collective or topology lacks, registry::CheckForm). Every
  // input is identical on every rank, so is the verdict.
  //
  // HCCL_ALGO (docs/CONVENTIONS.md: level0 = inside a node, level1 = between nodes):
  //  - one node: level0 applies, level1 does not;
  //  - several nodes, where hierarchical is valid for the collective (registry::IsValid): level0 is its intra
  //    step and level1 its inter step — level1:X gives hierarchical(intra=<level0 or chosen as usual>,inter=X),
  //    level0:X alone hierarchical(intra=X,inter=<chosen as usual>), level1:pipeline hierarchical with its
  //    default steps (intra=level0 when given). "Chosen as usual" is that step of the configuration the tuned
  //    table chooses for the call when that is hierarchical, else hierarchical's default step (what
  //    hierarchical(intra=X) in HCCL_TUNE_ALGO means): a configuration's canonical string names both steps,
  //    so "let the algorithm pick the step per call" cannot be written and is not used;
  //  - several nodes, no valid hierarchical (e.g. alltoall, or one rank per node): level1 applies to the
  //    whole collective; level0 alone leaves it automatic, since it speaks only of steps inside a node.
  static absl::StatusOr<Selector> Create(const Environment& env, int world_size, const GroupTopology& topo);

  struct Choice {
    const Configuration* config;
    ChoiceSource source;
  };
  // The choice for a call without a configuration of its own. `bytes` as docs/CONVENTIONS.md defines them.
  // Pure: never explores, counts nothing (used to print what would run and by sub-collectives).
  Choice Choose(Collective c, DataType dtype, uint64_t bytes) const;
  // The choice for the next collective operation of the communicator: as Choose, but applies the installed
  // table's exploration plans (when exploration is on). Which call explores is a function of how many calls the
  // entry decided since the table was installed — installation happens at the same operation on every rank
  // and every rank makes the same sequence of calls, so every rank explores on the same operation. No RNG.
  // REQUIRES: calls serialised by the caller (the communicator's call lock); not concurrent with Choose.
  Choice ChooseForCall(Collective c, DataType dtype, uint64_t bytes) const;

  // The configuration for one step of a hierarchical algorithm whose own configuration names none for the
  // step's collective (AlgorithmContext::ChooseStep): collective `c` of `bytes` among the `group_size` ranks of
  // one level (one node: `nodes` 1; or one rank on each of `nodes` nodes). The built-in defaults (policies/) for
  // that collective, size, group size and node count — the first matching line the registry says is valid on that
  // level — else the first valid algorithm in registry order. HCCL_TUNE_ALGO, HCCL_ALGO and the tuned table speak of
  // the communicator's own calls at its world size, not of steps, so they do not apply here. Pure and deterministic:
  // the same on every rank; thread-safe.
  static Configuration ChooseStep(Collective c, uint64_t bytes, int group_size, int nodes = 1);

  // Whether ChooseForCall, asked again for (c, dtype, bytes) with no SetTable in between, gives `choice` again:
  // not when it is, or could become, an exploration plan's configuration.
  bool Repeats(Collective c, DataType dtype, uint64_t bytes, const Choice& choice) const;
  // Changes with every SetTable: a caller's memo of choices is stale once it differs.
  uint64_t generation() const { return generation_; }

  // Installs a tuned table (entries for other world sizes are ignored; invalid configurations are dropped
  // with a warning). Null clears it. `explore`: follow the table's exploration plans (online mode only; static
  // mode and a pinned version never explore). Resets the plans' call counters.
  void SetTable(std::shared_ptr<const TunedTable> table, bool explore = false);
  int64_t table_version() const { return table_ ? table_->version : 0; }
  const std::string& table_hash() const;

 private:
  struct Slot {
    uint64_t min, max;
    const Configuration* config;
    const Configuration* explore;   // null = no plan (or exploration off)
    uint32_t every, budget;         // plan
    mutable uint64_t calls = 0;     // calls decided by this entry since SetTable (guarded by the caller)
    mutable uint32_t explored = 0;  // of which explored
    // HCCL_ALGO's configuration with this (hierarchical) entry's step where HCCL_ALGO left the step to the
    // usual choice; null = none.
    const Configuration* hccl = nullptr;
    bool predicted = false;  // the entry came from the cost model
  };
  // Which step of HCCL_ALGO's hierarchical configuration is left to the usual choice.
  enum class UsualStep : uint8_t { kNone, kIntra, kInter };
  // The table slot for (c, dtype, bytes), or null.
  const Slot* FindSlot(Collective c, DataType dtype, uint64_t bytes) const;
  policies::RuleSet overrides_;
  policies::RuleSet defaults_;  // the built-in rules for this world, node count and topology, in order
  std::array<std::optional<Configuration>, kNumCollectives> hccl_algo_;
  std::array<UsualStep, kNumCollectives> hccl_usual_{};
  std::vector<std::shared_ptr<const Configuration>> hccl_merged_;  // what Slot::hccl points to
  int world_ = 1;
  GroupTopology topo_;
  std::shared_ptr<const TunedTable> table_;
  std::vector<Slot> slots_[kNumCollectives][kNumDataTypes];  // sorted by min
  std::array<Configuration, kNumCollectives> fallback_;      // when the defaults have no line
  uint64_t generation_ = 0;
};

}  // namespace hccltune

// The selector: which configuration a collective call runs, decided in-process with no RPC, in precedence
// order (../shared/CONVENTIONS.md):
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
};

// A topology's tuned table as the daemon serves it.
struct TunedTable {
  int64_t version = 0;
  std::string content_hash;
  std::vector<TunedEntry> entries;

  // A compact text form used to hand the table to every rank (one entry per line, a plan on the line after
  // its entry).
  std::string Serialize() const;
  static absl::StatusOr<TunedTable> Deserialize(absl::string_view text);
};

enum class ChoiceSource : uint8_t { kCall, kTuneAlgo, kHcclAlgo, kTable, kDefault, kExplore };
absl::string_view ChoiceSourceName(ChoiceSource s);

class Selector {
 public:
  // Parses HCCL_TUNE_ALGO and HCCL_ALGO from `env`; an override naming an algorithm the collective does not
  // have is an error naming the variable.
  static absl::StatusOr<Selector> Create(const Environment& env, int world_size, const GroupTopology& topo);

  struct Choice {
    const Configuration* config;
    ChoiceSource source;
  };
  // The choice for a call without a configuration of its own. `bytes` as CONVENTIONS.md defines them.
  // Pure: never explores, counts nothing (used to print what would run and by sub-collectives).
  Choice Choose(Collective c, DataType dtype, uint64_t bytes) const;
  // The choice for the next collective operation of the communicator: as Choose, but applies the installed
  // table's exploration plans (when exploration is on). Which call explores is a function of how many calls the
  // entry decided since the table was installed — installation happens at the same operation on every rank
  // and every rank makes the same sequence of calls, so every rank explores on the same operation. No RNG.
  // REQUIRES: calls serialised by the caller (the communicator's call lock); not concurrent with Choose.
  Choice ChooseForCall(Collective c, DataType dtype, uint64_t bytes) const;

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
  };
  // The table slot for (c, dtype, bytes), or null.
  const Slot* FindSlot(Collective c, DataType dtype, uint64_t bytes) const;
  policies::RuleSet overrides_;
  std::array<std::optional<Configuration>, kNumCollectives> hccl_algo_;
  int world_ = 1;
  GroupTopology topo_;
  std::shared_ptr<const TunedTable> table_;
  std::vector<Slot> slots_[kNumCollectives][kNumDataTypes];  // sorted by min
  std::array<Configuration, kNumCollectives> fallback_;      // when the defaults have no line
};

}  // namespace hccltune

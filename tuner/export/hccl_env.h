// `hccl-tune export --format hccl-env`: HCCL_ALGO lines from one tuned table of this runtime.
//
// HCCL_ALGO names one algorithm per collective and level, with no byte ranges and no parameters, from a short
// list (ring, H-D_R = halving_doubling, pipeline = hierarchical between nodes; policies/rules.h). So per
// collective the exporter keeps the algorithm HCCL_ALGO can name whose time summed over the measured sizes is
// least, each size weighted by how many calls of that size the jobs reported (live samples, bucketed by power of
// two, each bucket counted at the measured size that covers it), or evenly when no job reported any. An
// algorithm's time at a size is its best configuration's median there (the sweep's kept samples), so chunk,
// channels and link are whatever was fastest; an algorithm not measured at every size is not compared. What the
// table's per-size winners would have taken is printed beside it: that is what HCCL_ALGO cannot express.
//
// On one node the choice is level0 (inside the node). On several nodes a choice of hierarchical(inter=X) is
// written level1:X (the step inside a node chosen as usual), and the others' level1:NAME apply to the whole
// collective as the selector reads them (runtime/selector/selector.h). HCCL_ALGO has no word for a hierarchical
// form, and level1:X runs form=auto (parallel on even nodes, leader on uneven ones): so a hierarchical
// configuration counts towards level1:X only when it runs that form (form=auto, or the form auto runs there);
// the other form is totalled under its own label, printed, and never chosen.
//
// Thread-safety: as the store.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "db/tuning_store.h"
#include "runtime/common/types.h"

namespace hccltune::exporter {

// One algorithm's total over a collective's measured sizes.
struct AlgorithmTotal {
  std::string algorithm;  // our name (ring, halving_doubling, hierarchical)
  double total_us = 0;    // sum over sizes of weight × its best median
  int missing = 0;        // measured sizes without a sample of it (then it is not compared)
  bool nameable = true;   // false: a hierarchical form HCCL_ALGO cannot name (printed, never chosen)
};

struct HcclEnvChoice {
  Collective collective = Collective::kAllreduce;
  std::string algorithm;   // ours; empty = none comparable (the line says NA)
  std::string hccl_level;  // "level0:ring;level1:NA" as written
  std::vector<AlgorithmTotal> totals;
  double winners_us = 0;    // the table's per-size winners under the same weights
  int sizes = 0;            // measured sizes
  uint64_t live_calls = 0;  // 0 = weighted evenly
};

struct HcclEnvExport {
  std::string fingerprint;
  int world_size = 0;
  int nodes = 1;
  int64_t table_version = 0;
  std::vector<HcclEnvChoice> choices;
  std::string hccl_algo;  // the HCCL_ALGO value
  std::string text;       // comments and the export line, as printed
};

// The table of `fingerprint` (empty: the store's only table of this runtime) at `world` (0: its only world
// size). NotFound / InvalidArgument name what is missing or ambiguous (listing the choices); FailedPrecondition
// when the table belongs to a peer runtime or the sweeps' samples are no longer kept.
absl::StatusOr<HcclEnvExport> ExportHcclEnv(db::TuningStore& store, const std::string& fingerprint, int world);

// The table a per-table export reads: `fingerprint`, or the store's only table whose runtime is `runtime`
// ("hccl-tune", "openmpi", "mpich"); errors list the candidates.
absl::StatusOr<db::Table> PickTable(db::TuningStore& store, const std::string& fingerprint, const std::string& runtime);
// The world sizes of a table's entries, ascending.
std::vector<int> WorldSizes(const db::Table& table);

}  // namespace hccltune::exporter

#include "tuner/peer_export/openmpi_rules.h"

#include <algorithm>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/fingerprint.h"
#include "runtime/common/peer_configuration.h"
#include "tuner/peer_export/peer_rules.h"

namespace hccltune::exporter {
namespace {

struct OmpiColl {
  Collective collective;
  int id;                               // coll/tuned's collective id (COLLTYPE_T)
  const char* mca;                      // its name in the MCA parameters
  std::vector<std::string> algorithms;  // in id order, from 1
};

const std::vector<OmpiColl>& Colls() {
  static const auto* colls = new std::vector<OmpiColl>{
      {Collective::kAllgather,
       0,
       "allgather",
       {"linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc"}},
      {Collective::kAllreduce,
       2,
       "allreduce",
       {"basic_linear", "nonoverlapping", "recursive_doubling", "ring", "segmented_ring", "rabenseifner"}},
      {Collective::kBroadcast,
       7,
       "bcast",
       {"basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree", "binomial", "knomial",
        "scatter_allgather", "scatter_allgather_ring"}},
      {Collective::kReducescatter,
       13,
       "reduce_scatter_block",
       {"basic_linear", "recursive_doubling", "recursive_halving", "butterfly"}},
  };
  return *colls;
}

const OmpiColl* Find(Collective c) {
  for (const OmpiColl& o : Colls()) {
    if (o.collective == c) return &o;
  }
  return nullptr;
}

// The fan-in/out a rule carries: coll/tuned passes it to bcast's chain algorithm as its number of chains, where a
// forced algorithm gets coll_tuned_bcast_algorithm_chain_fanout (4 unless set): the sweep measured chain so. The
// other algorithms of these collectives take none.
int FanInOut(const OmpiColl& o, const std::string& algorithm) {
  return o.collective == Collective::kBroadcast && algorithm == "chain" ? kOpenMpiChainFanout : 0;
}

}  // namespace

absl::StatusOr<int> OpenMpiAlgorithmId(Collective c, const std::string& algorithm) {
  const OmpiColl* o = Find(c);
  if (o == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("Open MPI rules cover allreduce, allgather, broadcast and ",
                                                   "reducescatter, not ", CollectiveName(c)));
  }
  if (algorithm == "default") return 0;
  auto it = std::find(o->algorithms.begin(), o->algorithms.end(), algorithm);
  if (it == o->algorithms.end()) {
    return absl::InvalidArgumentError(absl::StrCat("Open MPI 4 has no ", o->mca, " algorithm '", algorithm,
                                                   "'; it has: default, ", absl::StrJoin(o->algorithms, ", ")));
  }
  return static_cast<int>(it - o->algorithms.begin()) + 1;
}

absl::StatusOr<std::string> OpenMpiRules(const db::Table& table) {
  auto d = ParseTopologyJson(table.topology.json);
  if (!d.ok()) return d.status();
  if (!absl::StartsWith(d->runtime, "openmpi-4.")) {
    return absl::FailedPreconditionError(absl::StrCat("table ", table.topology.fingerprint, " was measured with ",
                                                      d->runtime, "; Open MPI rules come from a table of openmpi-4.x ",
                                                      "(hccl-tune sweep --runtime openmpi)"));
  }
  // collective id -> world -> entries (sorted by range, as the store keeps them).
  std::map<int, std::map<int, std::vector<const db::TunedEntry*>>> by;
  for (const db::TunedEntry& e : table.entries) {
    if (e.key.dtype != DataType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", CollectiveName(e.key.collective), "/",
                                                     DataTypeName(e.key.dtype), ": Open MPI rules have no dtype"));
    }
    const OmpiColl* o = Find(e.key.collective);
    if (o == nullptr) return OpenMpiAlgorithmId(e.key.collective, "").status();
    by[o->id][e.key.world_size].push_back(&e);
  }
  std::string out = absl::StrCat(
      "# Open MPI coll/tuned dynamic rules written by hccl-tune export --format openmpi-rules\n",
      "# from a table of runtime ", d->runtime.substr(0, d->runtime.find('-')), " (hccl-tune show lists it).\n",
      "# Per collective: communicator sizes; per size: message size, algorithm, fan in/out, segment size.\n");
  absl::StrAppend(&out, by.size(), "\n");
  for (const auto& [id, worlds] : by) {
    const OmpiColl* o = nullptr;
    for (const OmpiColl& x : Colls()) {
      if (x.id == id) o = &x;
    }
    const bool fixed_below = worlds.begin()->first > 1;
    absl::StrAppend(&out, "# ", o->mca, "\n", id, "\n", worlds.size() + (fixed_below ? 1 : 0), "\n");
    if (fixed_below) {
      absl::StrAppend(&out, "# smaller communicators than measured: Open MPI's fixed rules\n1\n1\n0 0 0 0\n");
    }
    for (const auto& [world, entries] : worlds) {
      std::vector<std::string> rules;
      uint64_t covered = 0;  // where the rules so far end: a gap before an entry gets Open MPI's fixed rules
      for (const db::TunedEntry* e : entries) {
        if (e->key.range.min > covered) rules.push_back(absl::StrCat(covered, " 0 0 0"));
        covered = e->key.range.max;
        auto p = PeerConfiguration::Parse(e->configuration);
        if (!p.ok()) return p.status();
        if (p->runtime != kOpenMpi) {
          return absl::InvalidArgumentError(
              absl::StrCat("entry configuration ", e->configuration, " is not Open MPI's"));
        }
        auto alg = OpenMpiAlgorithmId(e->key.collective, p->algorithm);
        if (!alg.ok()) return alg.status();
        if (KeepsOwnChoice(*e)) {
          rules.push_back(absl::StrCat(e->key.range.min, " 0 0 0"));
          continue;
        }
        rules.push_back(absl::StrCat(e->key.range.min, " ", *alg, " ", FanInOut(*o, p->algorithm), " ", p->segment));
      }
      absl::StrAppend(&out, world, "\n", rules.size(), "\n", absl::StrJoin(rules, "\n"), "\n");
    }
  }
  return out;
}

}  // namespace hccltune::exporter

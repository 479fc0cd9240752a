// Helpers for store tests: topologies with valid fingerprints, entries, temp directories.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "db/store_util.h"
#include "db/tuning_store.h"

namespace hccltune::db::testing {

// `nodes` nodes of `ranks_per_node` ranks each, one TCP network between them: the canonical format-2 JSON,
// written out here (not by the code under test), its fingerprint and class.
inline Topology MakeTopology(int nodes, int ranks_per_node = 8) {
  Topology t;
  std::vector<std::string> counts(static_cast<size_t>(nodes), std::to_string(ranks_per_node));
  const std::string inter = nodes > 1 ? R"({"link":"tcp","network":"10.20.0.0/16"})" : "";
  const std::string intra = ranks_per_node > 1 ? R"("shm")" : "";
  const std::string cls = absl::StrCat(R"({"format":2,"inter":[)", inter, R"(],"intra":[)", intra,
                                       R"(],"release":"0.1","runtime":"hccl-tune"})");
  t.json =
      absl::StrCat(R"({"format":2,"inter":[)", inter, R"(],"intra":[)", intra, R"(],"nodes":)", nodes,
                   R"(,"ranks_per_node":[)", absl::StrJoin(counts, ","), R"(],"release":"0.1","runtime":"hccl-tune"})");
  t.fingerprint = Sha256Hex(t.json).substr(0, 16);
  t.topology_class = Sha256Hex(cls).substr(0, 16);
  return t;
}

inline TunedEntry MakeEntry(Collective c, int world, uint64_t min, uint64_t max, const std::string& config,
                            double time_us = 10) {
  TunedEntry e;
  e.key = EntryKey{c, DataType::kFloat32, world, ByteRange{min, max}};
  e.configuration = config;
  e.time_us = time_us;
  e.busbw_gbps = 1.25;
  e.samples = 20;
  e.runner_up = "one_shot";
  e.margin = 0.1;
  e.default_margin = 0.3;
  e.sweep_id = "sweep-1";
  e.library_version = "0.1";
  e.measured_unix_ms = 1700000000000;
  return e;
}

// A fresh directory removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "hccltune-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace hccltune::db::testing

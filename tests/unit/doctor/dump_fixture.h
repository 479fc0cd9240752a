// Synthetic flight-recorder dumps for the doctor's tests (format: docs/TROUBLESHOOTING.md, The flight recorder):
// a scratch directory, entries and dumps written into it as a real recorder writes them.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tuner/doctor/dump_doctor.h"

namespace hccltune::doctor {

class DumpFixture : public ::testing::Test {
 protected:
  static constexpr int64_t kDumpNs = 100000000000;  // every dump's dump_time_ns
  static constexpr char kRing[] = "ring(chunk=1M,channels=1,link=auto)";

  void SetUp() override {
    char tmpl[] = "/tmp/doctor-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)system(absl::StrCat("rm -rf ", dir_).c_str()); }

  // An entry: operation `seq`, `coll` of `bytes`, state, source; blocked `blocked_s` seconds before the dump (< 0:
  // never).
  static nlohmann::json Entry(int seq, const std::string& coll, uint64_t bytes, const std::string& state,
                              const std::string& source = "default", double blocked_s = -1,
                              const std::string& config = kRing) {
    return {{"record_id", seq - 1},
            {"collective_seq_id", seq},
            {"profiling_name", "hccl-tune:" + coll},
            {"collective", coll},
            {"input_dtypes", {"float32"}},
            {"bytes", bytes},
            {"configuration", config},
            {"source", source},
            {"state", state},
            {"time_discovered_started_ns", nullptr},
            {"time_discovered_completed_ns", nullptr},
            {"duration_ms", state == "completed" ? nlohmann::json(0.5) : nlohmann::json(nullptr)},
            {"time_blocked_ns",
             blocked_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(kDumpNs - int64_t(blocked_s * 1e9))}};
  }
  // A completed call timed by the recorder: it started at `start_ns` and took `ms`.
  static nlohmann::json Timed(int seq, int64_t start_ns, double ms, const std::string& source = "default",
                              const std::string& config = kRing, uint64_t bytes = 8) {
    nlohmann::json e = Entry(seq, "allreduce", bytes, "completed", source, -1, config);
    e["time_discovered_started_ns"] = start_ns;
    e["time_discovered_completed_ns"] = start_ns + int64_t(ms * 1e6);
    e["duration_ms"] = ms;
    return e;
  }
  // A dump's header with `entries`, as a recorder of this build writes it (host facts included).
  static nlohmann::json Dump(int rank, int world, nlohmann::json entries, const std::string& reason = "signal") {
    int64_t last = -1;
    for (const auto& e : entries) {
      if (e["state"] == "completed") last = std::max<int64_t>(last, e["collective_seq_id"].get<int64_t>());
    }
    return {{"version", "hccl-tune-fr-1"},
            {"reason", reason},
            {"rank", rank},
            {"world_size", world},
            {"pid", 1000 + rank},
            {"host", "node-a"},
            {"node", "node-a"},
            {"local_ranks", world},
            {"nodes", 1},
            {"topology_fingerprint", ""},
            {"comm_tag", "00000000000000ab"},
            {"dump_time_ns", kDumpNs},
            {"last_completed_seq", last},
            {"error", ""},
            {"settings", {{"HCCL_ALGO", ""}, {"HCCL_TUNE_ALGO", ""}, {"HCCL_BUFFSIZE_bytes", 200ull << 20}}},
            {"cpu", {{"affinity", {rank}}, {"online", 64}, {"process_cpu_s", 1.0}, {"process_wall_s", 1.0}}},
            {"buffer_overflows", nlohmann::json::array()},
            {"entries", entries}};
  }
  void Save(const nlohmann::json& d) {
    std::ofstream(absl::StrCat(dir_, "/fr-00000000000000ab-r", d["rank"].get<int>(), ".json")) << d.dump();
  }
  // Rank `rank` of a `world`-rank communicator completed operations 1..done (8-byte allreduces), then `tail`.
  void Write(int rank, int world, int done, std::vector<nlohmann::json> tail = {},
             const std::string& source = "default", const std::string& reason = "signal") {
    nlohmann::json entries = nlohmann::json::array();
    for (int k = 1; k <= done; ++k) entries.push_back(Entry(k, "allreduce", 8, "completed", source));
    for (auto& e : tail) entries.push_back(e);
    nlohmann::json d = Dump(rank, world, entries, reason);
    d["last_completed_seq"] = done;
    Save(d);
  }
  std::vector<Finding> Diagnose(const DoctorOptions& options = {}) {
    auto f = DiagnoseDumpDir(dir_, options);
    EXPECT_TRUE(f.ok()) << f.status();
    return f.ok() ? *f : std::vector<Finding>{};
  }
  std::string dir_;
};

}  // namespace hccltune::doctor

// The flight recorder of a communicator (runtime/api/flight_recorder.h): every rank's dump names each call's
// sequence number, collective, size, configuration and its source, the fast path for repeated calls included;
// an exec timeout dumps by itself and its error names the configuration; HCCL_TUNE_FR_ENTRIES bounds and disables it.
#include "runtime/api/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/unit/runtime/rank_fixture.h"

namespace hccltune {
namespace {

using ::hccltune::testing::Contains;
using ::hccltune::testing::RunRanks;
using ::hccltune::testing::TestEnv;

absl::Status Allreduce8(Communicator& c, const std::string& config = "") {
  float in[2] = {1, 2}, out[2];
  CallOptions opt;
  opt.config = config;
  return c.Allreduce(in, out, 2, DataType::kFloat32, ReduceOp::kSum, opt);
}

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fr-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)system(absl::StrCat("rm -rf ", dir_).c_str()); }
  Environment Env() const {
    Environment e = TestEnv();
    e.fr_dump_dir = dir_;
    return e;
  }
  static nlohmann::json Read(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  // Each of 2 ranks makes `calls` 8-byte allreduces under `env`, then dumps on request; every rank's dump.
  std::vector<nlohmann::json> DumpAfter(int calls, const Environment& env) {
    std::vector<nlohmann::json> dumps(2);
    auto st = RunRanks(
        2,
        [&](int r, Communicator& c) -> absl::Status {
          for (int i = 0; i < calls; ++i) {
            if (absl::Status s = Allreduce8(c); !s.ok()) return s;
          }
          auto path = c.DumpFlightRecorder();
          if (!path.ok()) return path.status();
          dumps[static_cast<size_t>(r)] = Read(*path);
          return absl::OkStatus();
        },
        [&](int) { return env; });
    for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    return dumps;
  }
  // The same with `calls` allreduces of `bytes` under `config`, each checked.
  std::vector<nlohmann::json> DumpAfterBytes(int calls, size_t bytes, const std::string& config) {
    std::vector<nlohmann::json> dumps(2);
    auto st = RunRanks(
        2,
        [&](int r, Communicator& c) -> absl::Status {
          std::vector<float> in(bytes / sizeof(float), 1.0f), out(in.size());
          CallOptions opt;
          opt.config = config;
          for (int i = 0; i < calls; ++i) {
            absl::Status s = c.Allreduce(in.data(), out.data(), in.size(), DataType::kFloat32, ReduceOp::kSum, opt);
            if (!s.ok()) return s;
            if (out.front() != 2 || out.back() != 2) return absl::InternalError("wrong sum");
          }
          auto path = c.DumpFlightRecorder();
          if (!path.ok()) return path.status();
          dumps[static_cast<size_t>(r)] = Read(*path);
          return absl::OkStatus();
        },
        [&](int) { return Env(); });
    for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r];
    return dumps;
  }
  std::string dir_;
};

TEST_F(FlightRecorderTest, EveryRankRecordsEachCallWithItsConfigurationAndSource) {
  std::vector<nlohmann::json> dumps(2);
  auto st = RunRanks(
      2,
      [&](int r, Communicator& c) -> absl::Status {
        for (int i = 0; i < 3; ++i) {  // the second and third run the remembered fast path
          if (absl::Status s = Allreduce8(c); !s.ok()) return s;
        }
        if (absl::Status s = Allreduce8(c, "ring"); !s.ok()) return s;
        auto path = c.DumpFlightRecorder();
        if (!path.ok()) return path.status();
        dumps[static_cast<size_t>(r)] = Read(*path);
        return absl::OkStatus();
      },
      [&](int) { return Env(); });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)];
    const nlohmann::json& d = dumps[static_cast<size_t>(r)];
    ASSERT_FALSE(d.is_discarded()) << "rank " << r;
    EXPECT_EQ(d["rank"], r);
    EXPECT_EQ(d["reason"], "request");
    EXPECT_EQ(d["last_completed_seq"], 4);
    ASSERT_EQ(d["entries"].size(), 4u) << d.dump();
    for (int i = 0; i < 4; ++i) {
      const nlohmann::json& e = d["entries"][static_cast<size_t>(i)];
      EXPECT_EQ(e["collective_seq_id"], i + 1);
      EXPECT_EQ(e["profiling_name"], "hccl-tune:allreduce");
      EXPECT_EQ(e["bytes"], 8);
      EXPECT_EQ(e["state"], "completed");
      EXPECT_EQ(e["source"], i < 3 ? "default" : "call") << e.dump();
      EXPECT_FALSE(e["configuration"].get<std::string>().empty()) << e.dump();
      EXPECT_TRUE(e["time_created_ns"].is_null()) << e.dump();  // untimed: 1 call in 64 is, the first at 64
      EXPECT_TRUE(e["time_blocked_ns"].is_null()) << e.dump();
    }
    EXPECT_EQ(d["entries"][1]["configuration"], d["entries"][0]["configuration"]);
    EXPECT_EQ(d["entries"][3]["configuration"].get<std::string>().rfind("ring(", 0), 0u);
  }
  EXPECT_EQ(dumps[0]["comm_tag"], dumps[1]["comm_tag"]);
}

TEST_F(FlightRecorderTest, AnOverrideIsRecordedAsItsSource) {
  Environment env = Env();
  env.tune_algo = "allreduce:0-=ring(chunk=64K)";
  const std::vector<nlohmann::json> dumps = DumpAfter(2, env);
  for (int r = 0; r < 2; ++r) {
    const nlohmann::json& entries = dumps[static_cast<size_t>(r)]["entries"];
    ASSERT_EQ(entries.size(), 2u);
    for (const nlohmann::json& e : entries) {
      EXPECT_EQ(e["source"], "HCCL_TUNE_ALGO") << "rank " << r;
      EXPECT_EQ(e["configuration"].get<std::string>().rfind("ring(chunk=64K", 0), 0u) << e.dump();
    }
  }
}

TEST_F(FlightRecorderTest, TheDumpCarriesTheJobFactsAndBufferOverflows) {
  // HCCL_BUFFSIZE 1 MB; 4 MiB reducescatters on the ring need 4 MiB of scratch and more (the whole input).
  Environment env = Env();
  env.buffsize_bytes = 1 << 20;
  env.tune_algo = "reducescatter:0-=ring";
  std::vector<nlohmann::json> dumps(2);
  auto st = RunRanks(
      2,
      [&](int r, Communicator& c) -> absl::Status {
        std::vector<float> in(1 << 20, 1.0f), out(1 << 19);
        for (int i = 0; i < 3; ++i) {
          if (absl::Status s = c.Reducescatter(in.data(), out.data(), out.size(), DataType::kFloat32, ReduceOp::kSum);
              !s.ok()) {
            return s;
          }
        }
        auto path = c.DumpFlightRecorder();
        if (!path.ok()) return path.status();
        dumps[static_cast<size_t>(r)] = Read(*path);
        return absl::OkStatus();
      },
      [&](int) { return env; });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)].ok()) << st[static_cast<size_t>(r)];
    const nlohmann::json& d = dumps[static_cast<size_t>(r)];
    EXPECT_EQ(d["topology_fingerprint"].get<std::string>().size(), 16u) << d["topology_fingerprint"];
    EXPECT_EQ(d["local_ranks"], 2);
    EXPECT_EQ(d["nodes"], 1);
    EXPECT_FALSE(d["node"].get<std::string>().empty());
    EXPECT_EQ(d["settings"]["HCCL_TUNE_ALGO"], "reducescatter:0-=ring");
    EXPECT_EQ(d["settings"]["HCCL_BUFFSIZE_bytes"], 1 << 20);
    EXPECT_FALSE(d["cpu"]["affinity"].empty());
    EXPECT_GE(d["cpu"]["online"].get<int>(), 1);
    EXPECT_GE(d["cpu"]["process_cpu_s"].get<double>(), 0);
    ASSERT_EQ(d["buffer_overflows"].size(), 1u) << d["buffer_overflows"];
    const nlohmann::json& o = d["buffer_overflows"][0];
    EXPECT_EQ(o["min_bytes"], 4 << 20);  // the calls' size, 4 MiB: bucket [4M, 8M)
    EXPECT_EQ(o["max_bytes"], 8 << 20);
    EXPECT_EQ(o["calls"], 3);  // every call, not only the one that grew the scratch
    EXPECT_GE(o["max_need_bytes"].get<uint64_t>(), uint64_t{4} << 20);
  }
}

// links_used: every byte of 1 MiB ring allreduces forced onto TCP (each rank sends the whole buffer per call:
// half in the reduce-scatter, half in the allgather) counted on loopback, to the other rank, on no other node;
// over shm the ring's bytes under kind shm (single-copy payloads not among them). No rank table: null.
TEST_F(FlightRecorderTest, TheDumpCountsTheBytesEachLinkSent) {
  for (const std::string link : {"tcp", "shm"}) {
    const std::vector<nlohmann::json> dumps = DumpAfterBytes(4, 1 << 20, "ring(link=" + link + ")");
    for (int r = 0; r < 2; ++r) {
      const nlohmann::json& d = dumps[static_cast<size_t>(r)];
      EXPECT_TRUE(d["rank_table"].is_null());
      EXPECT_FALSE(d["interfaces"].empty());
      nlohmann::json mine;
      for (const nlohmann::json& l : d["links_used"]) {
        if (l["kind"] == link) mine = l;
      }
      ASSERT_TRUE(mine.is_object()) << link << ": " << d["links_used"];
      EXPECT_EQ(mine["interface"], link == "tcp" ? "lo" : "") << mine;
      // shm: a large message may go by single copy, whose payload the ring never carries.
      EXPECT_GE(mine["bytes_sent"].get<uint64_t>(), link == "tcp" ? uint64_t{4} << 20 : 1) << mine;
      EXPECT_LT(mine["bytes_sent"].get<uint64_t>(), uint64_t{5} << 20) << mine;
      EXPECT_EQ(mine["cross_node_bytes"], 0) << mine;
      EXPECT_EQ(mine["peers"], nlohmann::json::array({1 - r})) << mine;
    }
  }
}

TEST_F(FlightRecorderTest, TheRingKeepsTheLastEntriesAndZeroTurnsItOff) {
  Environment env = Env();
  env.fr_entries = 4;
  const std::vector<nlohmann::json> dumps = DumpAfter(10, env);
  for (int r = 0; r < 2; ++r) {
    const nlohmann::json& d = dumps[static_cast<size_t>(r)];
    EXPECT_EQ(d["records_written"], 10);
    ASSERT_EQ(d["entries"].size(), 4u);
    EXPECT_EQ(d["entries"][0]["collective_seq_id"], 7);
    EXPECT_EQ(d["entries"][0]["record_id"], 6);
    EXPECT_EQ(d["entries"][3]["collective_seq_id"], 10);
  }
  auto st = RunRanks(
      2,
      [&](int, Communicator& c) -> absl::Status {
        if (absl::Status s = Allreduce8(c); !s.ok()) return s;
        auto path = c.DumpFlightRecorder();
        return path.ok() ? absl::InternalError("dumped with HCCL_TUNE_FR_ENTRIES=0") : path.status();
      },
      [&](int) {
        Environment e = Env();
        e.fr_entries = 0;
        return e;
      });
  for (const absl::Status& s : st) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(Contains(s, "HCCL_TUNE_FR_ENTRIES=0")) << s;
  }
}

// Rank 1 stops calling after operation 2: rank 0's third call times out, its error names the configuration, and
// its dump (written by the timeout) has operations 1-2 completed and 3 failed with its configuration.
TEST_F(FlightRecorderTest, ATimeoutDumpsAndNamesTheConfiguration) {
  auto st = RunRanks(
      2,
      [&](int r, Communicator& c) -> absl::Status {
        for (int i = 0; i < 2; ++i) {
          if (absl::Status s = Allreduce8(c); !s.ok()) return s;
        }
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(2500));
          return absl::OkStatus();
        }
        return Allreduce8(c);
      },
      [&](int) {
        Environment e = Env();
        e.exec_timeout_s = 1;
        return e;
      });
  ASSERT_TRUE(st[1].ok()) << st[1];
  ASSERT_EQ(st[0].code(), absl::StatusCode::kDeadlineExceeded) << st[0];
  EXPECT_TRUE(Contains(st[0], "the call ran ")) << st[0];
  EXPECT_TRUE(Contains(st[0], ", chosen by default]")) << st[0];
  std::string dumped;
  FILE* ls = popen(absl::StrCat("ls ", dir_, "/fr-*-r0.json").c_str(), "r");
  char buf[512] = {};
  if (ls != nullptr && fgets(buf, sizeof(buf), ls) != nullptr) dumped = buf;
  if (ls != nullptr) pclose(ls);
  ASSERT_FALSE(dumped.empty()) << "no dump of rank 0 in " << dir_;
  dumped.pop_back();
  const nlohmann::json d = Read(dumped);
  EXPECT_EQ(d["reason"], "timeout");
  EXPECT_EQ(d["last_completed_seq"], 2);
  ASSERT_EQ(d["entries"].size(), 3u);
  const nlohmann::json& pending = d["entries"][2];
  EXPECT_EQ(pending["collective_seq_id"], 3);
  EXPECT_EQ(pending["state"], "failed");
  EXPECT_GT(pending["time_blocked_ns"].get<int64_t>(), 0) << pending.dump();  // seen blocked before it timed out
  EXPECT_LT(pending["time_blocked_ns"].get<int64_t>(), d["dump_time_ns"].get<int64_t>());
  EXPECT_TRUE(Contains(st[0], pending["configuration"].get<std::string>())) << st[0] << " vs " << pending.dump();
  EXPECT_TRUE(Contains(absl::InternalError(d["error"].get<std::string>()), "HCCL_EXEC_TIMEOUT")) << d.dump();
}

}  // namespace
}  // namespace hccltune

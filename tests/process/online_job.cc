// A training-like job for tests/process/online.sh: one rank of an env:// job (RANK, WORLD_SIZE,
// HCCL_TUNE_STORE) that runs CALLS 8-byte allreduces ("auto": the selector decides, with the daemon's table),
// checks every result exactly, and writes the configuration of every call, one per line, to OUT_DIR/rank<R>.
// Prints a summary line per rank: calls per configuration. Exit status 1 on any error or wrong result.
// Usage: online_job CALLS OUT_DIR
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "runtime/api/communicator.h"
#include "runtime/tuning_client/tuning_client.h"
#include "tests/process/job_communicator.h"

int main(int argc, char** argv) {
  using namespace hccltune;
  if (argc != 3) {
    std::fprintf(stderr, "usage: online_job CALLS OUT_DIR\n");
    return 2;
  }
  const long calls = std::strtol(argv[1], nullptr, 10);
  InstallDaemonTuning();
  std::unique_ptr<Communicator> comm = testjobs::CommunicatorFromEnvironment();
  if (comm == nullptr) return 1;
  Communicator& c = *comm;
  const int n = c.size(), r = c.rank();
  std::ofstream out(std::string(argv[2]) + "/rank" + std::to_string(r));
  std::map<std::string, long> per_config;
  for (long i = 0; i < calls; ++i) {
    int32_t v[2] = {static_cast<int32_t>(r + 1 + i % 1000), 7 * (r + 1)};
    if (absl::Status s = c.Allreduce(v, v, 2, DataType::kInt32, ReduceOp::kSum); !s.ok()) {
      std::fprintf(stderr, "rank %d call %ld: %s\n", r, i, std::string(s.message()).c_str());
      return 1;
    }
    const int32_t want0 = n * (n + 1) / 2 + n * static_cast<int32_t>(i % 1000), want1 = 7 * n * (n + 1) / 2;
    if (v[0] != want0 || v[1] != want1) {
      std::fprintf(stderr, "rank %d call %ld: got {%d, %d}, expected {%d, %d}\n", r, i, v[0], v[1], want0, want1);
      return 1;
    }
    const std::string cfg = c.last_config();
    ++per_config[cfg];
    out << cfg << "\n";
  }
  std::string summary;
  for (const auto& [cfg, k] : per_config) summary += " " + cfg + "=" + std::to_string(k);
  std::printf("rank %d: %ld calls, every result correct;%s\n", r, calls, summary.c_str());
  return 0;
}

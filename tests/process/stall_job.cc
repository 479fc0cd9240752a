// A job for tests/process/job_view.sh: one rank of an env:// job (RANK, WORLD_SIZE, HCCL_TUNE_STORE, reporting to
// HCCL_TUNE_DAEMON) that runs 8-byte allreduces with a 1 ms pause after each, checking every result exactly,
// until rank 0 sees the file DIR/stop (carried in each call: every rank stops after the same call). Rank
// STALL_RANK (-1: none) stops calling collectives before call STALL_AT and sleeps until the file DIR/release
// exists (at most 120 s), while the others block in that call. Prints "rank R: N calls, every result correct".
// Exit status 1 on any error or wrong result.
// Usage: stall_job DIR STALL_RANK STALL_AT
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/api/communicator.h"
#include "runtime/tuning_client/tuning_client.h"
#include "tests/process/job_communicator.h"

namespace {
bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }
}  // namespace

int main(int argc, char** argv) {
  using namespace hccltune;
  if (argc != 4) {
    std::fprintf(stderr, "usage: stall_job DIR STALL_RANK STALL_AT\n");
    return 2;
  }
  const std::string dir = argv[1];
  const long stall_rank = std::strtol(argv[2], nullptr, 10), stall_at = std::strtol(argv[3], nullptr, 10);
  InstallDaemonTuning();
  std::unique_ptr<Communicator> comm = testjobs::CommunicatorFromEnvironment();
  if (comm == nullptr) return 1;
  Communicator& c = *comm;
  const int n = c.size(), r = c.rank();
  long i = 0;
  for (;; ++i) {
    if (r == stall_rank && i == stall_at) {
      for (int t = 0; t < 2400 && !Exists(dir + "/release"); ++t) ::usleep(50000);
    }
    int32_t v[2] = {static_cast<int32_t>(r + 1 + i % 1000), r == 0 && Exists(dir + "/stop") ? 1 : 0};
    if (absl::Status s = c.Allreduce(v, v, 2, DataType::kInt32, ReduceOp::kSum); !s.ok()) {
      std::fprintf(stderr, "rank %d call %ld: %s\n", r, i, std::string(s.message()).c_str());
      return 1;
    }
    const int32_t want = n * (n + 1) / 2 + n * static_cast<int32_t>(i % 1000);
    if (v[0] != want || (v[1] != 0 && v[1] != 1)) {
      std::fprintf(stderr, "rank %d call %ld: got {%d, %d}, expected {%d, 0 or 1}\n", r, i, v[0], v[1], want);
      return 1;
    }
    if (v[1] == 1) break;
    ::usleep(1000);
  }
  std::printf("rank %d: %ld calls, every result correct\n", r, i + 1);
  return 0;
}

// A small job for tests/process/doctor.sh: one rank of an env:// job (RANK, WORLD_SIZE, HCCL_TUNE_STORE) that runs
// CALLS float32 sum allreduces or reducescatters (COLL) of BYTES (the whole buffer, docs/CONVENTIONS.md Sizes;
// configuration "auto": HCCL_TUNE_ALGO, HCCL_ALGO, the table or the defaults decide), checks every result
// exactly, and dumps its flight recorder at the end (reason "exit"). With SLOW_RANK and SLEEP_US, that rank sleeps
// SLEEP_US before each call (a straggler). Prints one line per rank.
// Usage: doctor_job allreduce|reducescatter CALLS BYTES [SLOW_RANK SLEEP_US]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/api/communicator.h"
#include "runtime/api/flight_recorder.h"
#include "tests/process/job_communicator.h"

int main(int argc, char** argv) {
  using namespace hccltune;
  const std::string coll = argc > 1 ? argv[1] : "";
  if ((argc != 4 && argc != 6) || (coll != "allreduce" && coll != "reducescatter")) {
    std::fprintf(stderr, "usage: doctor_job allreduce|reducescatter CALLS BYTES [SLOW_RANK SLEEP_US]\n");
    return 2;
  }
  const long calls = std::strtol(argv[2], nullptr, 10);
  const size_t count = std::max<size_t>(1, std::strtoul(argv[3], nullptr, 10) / sizeof(float));
  const int slow = argc == 6 ? std::atoi(argv[4]) : -1;
  const useconds_t sleep_us = argc == 6 ? static_cast<useconds_t>(std::atol(argv[5])) : 0;
  std::unique_ptr<Communicator> comm = testjobs::CommunicatorFromEnvironment();
  if (comm == nullptr) return 1;
  Communicator& c = *comm;
  const int n = c.size(), r = c.rank();
  const bool scatter = coll == "reducescatter";
  const size_t out_count = scatter ? std::max<size_t>(1, count / static_cast<size_t>(n)) : count;
  std::vector<float> in(scatter ? out_count * static_cast<size_t>(n) : count), v(out_count);
  for (long i = 0; i < calls; ++i) {
    if (r == slow) usleep(sleep_us);
    const float mine = static_cast<float>(r + 1 + i % 7);
    for (float& x : in) x = mine;
    const absl::Status s = scatter ? c.Reducescatter(in.data(), v.data(), out_count, DataType::kFloat32, ReduceOp::kSum)
                                   : c.Allreduce(in.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d call %ld: %s\n", r, i, std::string(s.message()).c_str());
      return 1;
    }
    const float want = static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
    if (v.front() != want || v.back() != want) {
      std::fprintf(stderr, "rank %d call %ld: got %g..%g, expected %g\n", r, i, v.front(), v.back(), want);
      return 1;
    }
  }
  auto paths = DumpFlightRecorders("exit");
  if (!paths.ok() || paths->empty()) {
    std::fprintf(stderr, "rank %d: no flight-recorder dump: %s\n", r,
                 paths.ok() ? "no recorder" : std::string(paths.status().message()).c_str());
    return 1;
  }
  std::printf("rank %d: %ld %ss of %zu floats correct, ran %s; dumped to %s\n", r, calls, coll.c_str(), in.size(),
              c.last_config().c_str(), paths->front().c_str());
  return 0;
}

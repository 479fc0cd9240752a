// Communicator init time under a real launcher: each rank times Communicator::FromEnvironment (launcher
// variables, rendezvous, rank exchange, transports) and a first barrier, and prints "init_ms RANK MS START END"
// (START and END: wall-clock seconds, one clock for the ranks of one host). tests/perf/init_time.sh takes the
// last END minus the last START: the init once every rank has started, without the launcher's start skew.
// Usage: mpirun -np N hccltune-init-time   (or srun, mpiexec)
#include <chrono>
#include <cstdio>

#include "runtime/api/communicator.h"
#include "runtime/common/config.h"

namespace {
double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

int main() {
  const double start = WallSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto env = hccltune::Environment::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "init_time: %s\n", std::string(env.status().message()).c_str());
    return 2;
  }
  auto comm = hccltune::Communicator::FromEnvironment(*env);
  if (!comm.ok()) {
    std::fprintf(stderr, "init_time: %s\n", std::string(comm.status().message()).c_str());
    return 1;
  }
  if (absl::Status s = (*comm)->Barrier(); !s.ok()) {
    std::fprintf(stderr, "init_time: barrier: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("init_ms %d %.1f %.6f %.6f\n", (*comm)->rank(), ms, start, WallSeconds());
  return 0;
}

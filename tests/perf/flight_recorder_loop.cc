// The flight recorder's cost on the smallest call: 2 ranks (threads, shm) run back-to-back 8-byte allreduces with
// the recorder off (HCCL_TUNE_FR_ENTRIES=0, twice: off and off', the control) and on (the default), interleaved
// run by run (off on off', off' on off, ...) in one process. Prints each run's time per call (the slower rank's),
// the medians, the control's spread |off'/off - 1| and on/off. Budget: on/off <= 1.05 (docs/TROUBLESHOOTING.md).
//   build/tests/perf/hccltune-flight-recorder-loop [REPS [CALLS]]     (defaults 7 and 200000)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "runtime/api/communicator.h"
#include "runtime/bootstrap/store.h"
#include "runtime/common/config.h"

namespace hccltune {
namespace {

// One run: ns per call of `calls` allreduces after a warm-up, the slower rank's; negative on failure.
double Run(uint32_t fr_entries, int calls) {
  auto store = NewMemoryStore();
  double ns[2] = {-1, -1};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      Environment env;
      env.daemon = "off";
      env.fr_entries = fr_entries;
      auto comm = Communicator::Create(r, 2, store, env);
      if (!comm.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, std::string(comm.status().message()).c_str());
        return;
      }
      float in[2] = {1, 2}, out[2];
      for (int i = 0; i < calls / 10; ++i) (void)(*comm)->Allreduce(in, out, 2, DataType::kFloat32, ReduceOp::kSum);
      if (!(*comm)->Barrier().ok()) return;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) {
        if (!(*comm)->Allreduce(in, out, 2, DataType::kFloat32, ReduceOp::kSum).ok()) return;
      }
      ns[r] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / calls;
      (void)(*comm)->Barrier();
    });
  }
  for (auto& t : ranks) t.join();
  return ns[0] < 0 || ns[1] < 0 ? -1 : std::max(ns[0], ns[1]);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace
}  // namespace hccltune

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 200000;
  const char* names[3] = {"off", "on", "off'"};
  const uint32_t entries[3] = {0, hccltune::Environment::kDefaultFrEntries, 0};
  std::map<int, std::vector<double>> ns;
  for (int r = 0; r < reps; ++r) {
    for (int k = 0; k < 3; ++k) {
      const int m = r % 2 == 0 ? k : 2 - k;
      const double t = hccltune::Run(entries[m], calls);
      if (t < 0) return 1;
      ns[m].push_back(t);
    }
  }
  for (int m = 0; m < 3; ++m) {
    std::printf("%-4s", names[m]);
    for (double t : ns[m]) std::printf(" %.1f", t);
    std::printf("  median %.1f ns/call\n", hccltune::Median(ns[m]));
  }
  const double off = hccltune::Median(ns[0]), on = hccltune::Median(ns[1]), off2 = hccltune::Median(ns[2]);
  std::printf("control |off'/off - 1| %.3f  on/off %.3f\n", off2 / off > 1 ? off2 / off - 1 : 1 - off2 / off, on / off);
  return 0;
}

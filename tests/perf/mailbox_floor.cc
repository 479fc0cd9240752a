// The floor of a small allreduce on this machine: N processes, each with two 64-byte slots (one per call parity)
// in one shared mapping and nothing else. A call writes the rank's value and the call number into its slot, then
// reads every other rank's slot, yielding (sched_yield) while one has not arrived, and sums. Timed as the peers'
// benchmark and `hccl-tune bench` time (docs/CONVENTIONS.md, Timing): a barrier of the same kind, then one timed call;
// the figure is the median over calls of the maximum over ranks. What the runtime's mailbox exchange
// (runtime/transport/mailbox.h) costs above this is the runtime's own per-call work.
//
//   hccltune-mailbox-floor [RANKS=4] [CALLS=2000]      (rank r bound to CPU r mod CPUs, as hccl-tune bench does)
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tests/perf/floor_report.h"

namespace {

struct alignas(64) Slot {
  std::atomic<uint64_t> call;
  float value;
};

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One exchange over `slots` (2 x n): returns the sum of every rank's value for call `k`.
float Exchange(Slot* slots, int n, int rank, uint64_t k, float value) {
  Slot& mine = slots[(k & 1) * static_cast<uint64_t>(n) + static_cast<uint64_t>(rank)];
  mine.value = value;
  mine.call.store(k, std::memory_order_release);
  float sum = 0;
  for (int q = 0; q < n; ++q) {
    Slot& s = slots[(k & 1) * static_cast<uint64_t>(n) + static_cast<uint64_t>(q)];
    while (s.call.load(std::memory_order_acquire) != k) sched_yield();
    sum += s.value;
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  const long calls = argc > 2 ? std::atol(argv[2]) : 2000;
  if (n < 1 || calls < 1) {
    std::fprintf(stderr, "usage: %s [RANKS>=1] [CALLS>=1]\n", argv[0]);
    return 2;
  }
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const size_t bytes = sizeof(Slot) * 4 * static_cast<size_t>(n) + sizeof(double) * static_cast<size_t>(n * calls);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* call_slots = static_cast<Slot*>(p);  // 2 x n
  Slot* barrier_slots = call_slots + 2 * n;  // 2 x n
  auto* times = reinterpret_cast<double*>(barrier_slots + 2 * n);
  for (int r = 0; r < n; ++r) {
    if (fork() == 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(static_cast<int>(r % cpus), &set);
      (void)sched_setaffinity(0, sizeof(set), &set);
      const float expect = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
      for (long k = 1; k <= calls; ++k) {
        (void)Exchange(barrier_slots, n, r, static_cast<uint64_t>(k), 0);
        const double t0 = NowUs();
        const float sum = Exchange(call_slots, n, r, static_cast<uint64_t>(k), static_cast<float>(r + 1));
        times[static_cast<size_t>(r) * static_cast<size_t>(calls) + static_cast<size_t>(k - 1)] = NowUs() - t0;
        if (sum != expect) _exit(3);
      }
      _exit(0);
    }
  }
  return hccltune::perf::ReapAndReport(n, calls, cpus, times, "");
}

// hccltune-yield-floor: what one context switch by sched_yield costs on this machine — the unit of a small
// collective when ranks outnumber CPUs (4 ranks on 2 cores), where every wait hands the CPU to the other rank
// on it (runtime/transport/stream_endpoint.h, Waiting). P processes are bound to one CPU and each calls
// sched_yield Y times; with all of them runnable every yield switches, so the elapsed time over P x Y is the
// cost of one switch: the syscall, the scheduler and the return to the other process, no rank work at all.
//
// Usage: hccltune-yield-floor [PROCESSES=2] [YIELDS=200000]
// Prints "processes P yields Y cpu C: X ns per switch" (the median of 5 runs).
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  const int procs = argc > 1 ? std::atoi(argv[1]) : 2;
  const long yields = argc > 2 ? std::atol(argv[2]) : 200000;
  if (procs < 2 || procs > 64 || yields < 1) {
    std::fprintf(stderr, "usage: %s [PROCESSES=2..64] [YIELDS>=1]\n", argv[0]);
    return 2;
  }
  // Bind to the first CPU this process may use (all processes share it).
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
    std::perror("sched_getaffinity");
    return 1;
  }
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof(one), &one) != 0) {
    std::perror("sched_setaffinity");
    return 1;
  }
  std::vector<double> runs;
  for (int run = 0; run < 5; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<pid_t> children;
    for (int p = 1; p < procs; ++p) {
      const pid_t pid = fork();
      if (pid < 0) {
        std::perror("fork");
        return 1;
      }
      if (pid == 0) {
        for (long i = 0; i < yields; ++i) sched_yield();
        _exit(0);
      }
      children.push_back(pid);
    }
    for (long i = 0; i < yields; ++i) sched_yield();
    for (pid_t pid : children) {
      int status = 0;
      if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "a yielding process failed\n");
        return 1;
      }
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    runs.push_back(ns / (static_cast<double>(procs) * static_cast<double>(yields)));
  }
  std::sort(runs.begin(), runs.end());
  std::printf("processes %d yields %ld cpu %d: %.0f ns per switch\n", procs, yields, cpu, runs[runs.size() / 2]);
  return 0;
}

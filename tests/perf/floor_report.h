// What the floor programs (mailbox_floor.cc, exchange_floor.cc) share: reaping the forked ranks and reporting the
// median over calls of the maximum over ranks (docs/CONVENTIONS.md, Timing), as `hccl-tune bench` times a call.
#pragma once

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace hccltune::perf {

// Waits for the n forked ranks; `times` holds rank r's duration of call k at [r * calls + k]. Prints
// "ranks N calls C cpus P: <what>median of the max over ranks X us per call" and returns 0, or 1 after naming a
// failed rank's exit (its own check failed, it crashed).
inline int ReapAndReport(int n, long calls, long cpus, const double* times, const char* what) {
  int failed = 0;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  if (failed) {
    std::fprintf(stderr, "a rank failed (its call failed, a wrong sum, or a crash)\n");
    return 1;
  }
  const size_t c = static_cast<size_t>(calls);
  std::vector<double> worst(c, 0.0);
  for (size_t k = 0; k < c; ++k) {
    for (size_t r = 0; r < static_cast<size_t>(n); ++r) worst[k] = std::max(worst[k], times[r * c + k]);
  }
  std::sort(worst.begin(), worst.end());
  std::printf("ranks %d calls %ld cpus %ld: %smedian of the max over ranks %.3f us per call\n", n, calls, cpus, what,
              worst[worst.size() / 2]);
  return 0;
}

}  // namespace hccltune::perf

#include "runtime/common/host.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace hccltune {

int HostCpus() {
  static const int cpus = [] {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : static_cast<int>(std::min<long>(n, INT_MAX));
  }();
  return cpus;
}

bool BoundToOneCpu() { return BoundCpu() >= 0; }

int BoundCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) != 1) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return -1;
}

}  // namespace hccltune

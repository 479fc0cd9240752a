#include "runtime/common/host.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace hccltune {

int HostCpus() {
  static const int cpus = [] {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : static_cast<int>(std::min<long>(n, INT_MAX));
  }();
  return cpus;
}

bool ProcessGone(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  // A killed process stays a zombie until its parent reaps it: look at its state too.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const char* close = std::strrchr(buf, ')');
  return n > 0 && close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
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

namespace {

bool ReadLine(const std::string& path, std::string& out) {
  std::ifstream f(path);
  return static_cast<bool>(std::getline(f, out));
}

// "32768K", "1M", "512" (bytes) as sysfs writes cache sizes; 0 when it is none of these.
uint64_t ParseCacheSize(const std::string& s) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && v < (1ull << 50))
    v = v * 10 + static_cast<uint64_t>(s[i++] - '0');
  if (i == 0) return 0;
  const std::string unit = s.substr(i);
  if (unit.empty()) return v;
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  if (unit == "G") return v << 30;
  return 0;
}

}  // namespace

uint64_t LastLevelCacheBytesIn(const std::string& cpu_dir) {
  int best_level = 0;
  uint64_t best = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = cpu_dir + "/cache/index" + std::to_string(index) + "/";
    std::string level, type, size;
    if (!ReadLine(dir + "level", level) || !ReadLine(dir + "type", type) || !ReadLine(dir + "size", size)) continue;
    if (type == "Instruction") continue;
    const int l = std::atoi(level.c_str());
    const uint64_t bytes = ParseCacheSize(size);
    if (l > best_level && bytes > 0) {
      best_level = l;
      best = bytes;
    }
  }
  return best_level >= 3 ? best : 0;  // an L2 taken for the last level would overstate each rank's share
}

uint64_t LastLevelCacheBytes() {
  static const uint64_t bytes = [] {
    const int cpu = std::max(BoundCpu(), 0);
    return LastLevelCacheBytesIn("/sys/devices/system/cpu/cpu" + std::to_string(cpu));
  }();
  return bytes;
}

size_t ShmRingBytes(uint64_t buffsize_bytes, int host_ranks, int host_cpus) {
  constexpr uint64_t kMax = 4ull << 20, kMaxOversubscribed = 1ull << 20;
  constexpr uint64_t kInboundOversubscribed = 16ull << 20, kMinOversubscribed = 64ull << 10;
  const auto peers = static_cast<uint64_t>(host_ranks - 1);
  uint64_t cap = kMax;
  if (host_ranks > host_cpus)
    cap = std::min(kMaxOversubscribed, std::max(kMinOversubscribed, kInboundOversubscribed / peers));
  return static_cast<size_t>(std::min<uint64_t>(cap, buffsize_bytes / peers));
}

uint64_t AutoNtStoresBytes(uint64_t llc_bytes, int host_ranks) {
  constexpr uint64_t kMin = 4ull << 20, kMax = 32ull << 20;
  if (llc_bytes == 0 || host_ranks < 2) return kMax;  // unknown, or no shm peers (unmeasured): the fixed default
  return std::clamp<uint64_t>(llc_bytes / (2 * static_cast<uint64_t>(host_ranks)), kMin, kMax);
}

}  // namespace hccltune

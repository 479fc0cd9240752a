#include "runtime/transport/shm/cma_cost.h"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hccltune {
namespace {

double Measure() {
  constexpr size_t kBytes = 64u << 10;
  constexpr int kTries = 9;
  // Two private buffers in 4 KiB pages, as an ordinary caller's buffer of this size is.
  void* mem = ::mmap(nullptr, 2 * kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 0;
  (void)::madvise(mem, 2 * kBytes, MADV_NOHUGEPAGE);
  auto* src = static_cast<uint8_t*>(mem);
  uint8_t* dst = src + kBytes;
  std::memset(src, 1, kBytes);
  std::memset(dst, 2, kBytes);
  using Clock = std::chrono::steady_clock;
  double copy = std::numeric_limits<double>::max(), cma = std::numeric_limits<double>::max();
  bool refused = false;
  for (int t = 0; t < kTries + 2 && !refused; ++t) {  // the first two warm the caches and the page tables
    const auto t0 = Clock::now();
    std::memcpy(dst, src, kBytes);
    asm volatile("" : : "r"(dst) : "memory");  // the copy is not elided
    const auto t1 = Clock::now();
    iovec local{dst, kBytes}, remote{src, kBytes};
    refused = ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(kBytes);
    const auto t2 = Clock::now();
    if (t >= 2) {
      copy = std::min(copy, std::chrono::duration<double>(t1 - t0).count());
      cma = std::min(cma, std::chrono::duration<double>(t2 - t1).count());
    }
  }
  ::munmap(mem, 2 * kBytes);
  if (refused || copy <= 0) return 0;
  return cma / copy;
}

}  // namespace

double SingleCopyCostRatio() {
  static const double ratio = Measure();
  return ratio;
}

size_t SingleCopyMinBytes(double ratio, bool oversubscribed) {
  if (ratio > kExpensiveSingleCopyRatio) return oversubscribed ? (8u << 20) : (4u << 20);
  return oversubscribed ? (16u << 10) : (8u << 10);
}

}  // namespace hccltune

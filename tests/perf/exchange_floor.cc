// The mailbox exchange alone: N processes, each with the runtime's shm domain and StreamEndpoint, time one
// StreamEndpoint::Exchange of a 4-byte block (and sum the blocks) after an exchange used as a barrier — the
// transport's share of a small allreduce, without the communicator (argument checks, configuration choice,
// dispatch) or the bench around it. Timed as hccltune-mailbox-floor and `hccl-tune bench` time (docs/CONVENTIONS.md,
// Timing): the median over calls of the maximum over ranks. Between the two floors: what the exchange costs above
// bare slots, and what the layers above it cost.
//
//   hccltune-exchange-floor [RANKS=4] [CALLS=2000]      (rank r bound to CPU r mod CPUs, as hccl-tune bench does)
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/transport/shm/shm_transport.h"
#include "runtime/transport/stream_endpoint.h"
#include "tests/perf/floor_report.h"

namespace {

double NowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hccltune;  // NOLINT(build/namespaces): a benchmark program
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  const long calls = argc > 2 ? std::atol(argv[2]) : 2000;
  if (n < 2 || n > 64 || calls < 1) {
    std::fprintf(stderr, "usage: %s [RANKS 2..64] [CALLS>=1]\n", argv[0]);
    return 2;
  }
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks[static_cast<size_t>(r)] = r;
  std::vector<std::unique_ptr<ShmDomain>> doms;
  std::map<int, std::string> names;
  ShmOptions options;
  options.single_copy = false;
  for (int r = 0; r < n; ++r) {
    auto d = ShmDomain::Create(r, ranks, 64u << 10, absl::StrCat("hccltune-xfloor-", ::getpid()), options);
    if (!d.ok()) {
      std::fprintf(stderr, "shm: %s\n", std::string(d.status().message()).c_str());
      return 1;
    }
    names[r] = (*d)->segment_name();
    doms.push_back(*std::move(d));
  }
  for (auto& d : doms) {
    if (absl::Status s = d->MapPeers(names); !s.ok()) {
      std::fprintf(stderr, "shm: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  for (auto& d : doms) d->Unlink();
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  void* p = mmap(nullptr, sizeof(double) * static_cast<size_t>(n * calls), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    return 1;
  }
  auto* times = static_cast<double*>(p);
  for (int r = 0; r < n; ++r) {
    if (fork() != 0) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<int>(r % cpus), &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
    ShmDomain& dom = *doms[static_cast<size_t>(r)];
    std::vector<Pair*> pairs(static_cast<size_t>(n), nullptr);
    for (int q = 0; q < n; ++q) {
      if (q != r) pairs[static_cast<size_t>(q)] = dom.pair(q);
    }
    StreamEndpoint ep(r, pairs, dom.doorbell(), absl::Seconds(30));
    ep.SetMailbox(dom.mailbox());
    std::vector<const void*> blocks(static_cast<size_t>(n));
    const float expect = static_cast<float>(n) * static_cast<float>(n + 1) / 2;
    for (long k = 0; k < calls; ++k) {
      ep.SetCall({static_cast<uint32_t>(2 * k), Collective::kBarrier, DataType::kUint8, ReduceOp::kSum, 0, 0});
      if (!ep.Exchange(nullptr, 0, blocks.data()).ok()) _exit(3);
      const double t0 = NowUs();
      const float mine = static_cast<float>(r + 1);
      ep.SetCall({static_cast<uint32_t>(2 * k + 1), Collective::kAllreduce, DataType::kFloat32, ReduceOp::kSum, 1, 0});
      if (!ep.Exchange(&mine, sizeof(mine), blocks.data()).ok()) _exit(3);
      float sum = 0;
      for (int q = 0; q < n; ++q) sum += *static_cast<const float*>(blocks[static_cast<size_t>(q)]);
      times[static_cast<size_t>(r) * static_cast<size_t>(calls) + static_cast<size_t>(k)] = NowUs() - t0;
      if (sum != expect) _exit(4);
    }
    _exit(0);
  }
  return hccltune::perf::ReapAndReport(n, calls, cpus, times, "exchange alone, ");
}

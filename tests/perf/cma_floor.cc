// What a 2-rank fp32 sum allreduce of ordinary (private, malloc'd) buffers costs when each rank reads the peer's
// memory with the kernel's single copy (process_vm_readv) instead of through shared rings: the design the ring
// would have to lose to before single copy is worth building for allreduce.
//
// Two processes, each bound to its own CPU. Rank r owns half r of the vector. Per call, for each chunk of its half:
// process_vm_readv of the peer's input chunk into a cache-sized tile, then out = own input + tile (AVX2; streamed
// stores with --nt), then a published count of finished chunks; between its own chunks it pulls the peer's
// finished output chunks straight into its own output (a second process_vm_readv, memory to memory). So per
// rank: one kernel copy of S/2 into the cache, one reduction over S/2, one kernel copy of S/2 — less traffic than
// the ring's three user copies, but every kernel copy pins the peer's pages first. The figure is the median over
// calls of rank 0's time for a call started together (a spin barrier), outputs checked after the last call.
//
//   hccltune-cma-floor BYTES [CHUNK_BYTES=1048576] [CALLS=20] [--nt] [--thp]
//     --thp: the buffers 2 MiB aligned and marked MADV_HUGEPAGE (fewer pages to pin; needs THP "madvise"/"always")
#include <immintrin.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Shared {
  std::atomic<int> pid[2];
  std::atomic<uintptr_t> send[2], recv[2];
  std::atomic<int64_t> arrived[2];  // barrier generation
  std::atomic<int64_t> done[2];     // chunks of this rank's half finished, counted over all calls
  double median_us[2];
};

void Barrier(Shared* s, int r, int64_t& gen) {
  ++gen;
  s->arrived[r].store(gen, std::memory_order_release);
  while (s->arrived[1 - r].load(std::memory_order_acquire) < gen) {
  }
}

__attribute__((target("avx2"))) void Add(float* out, const float* a, const float* b, size_t n, bool nt) {
  size_t i = 0;
  if (nt) {
    for (; i < n && (reinterpret_cast<uintptr_t>(out + i) & 31) != 0; ++i) out[i] = a[i] + b[i];
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    _mm_sfence();
  } else {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

bool ReadPeer(pid_t pid, void* to, const void* from, size_t bytes) {
  iovec local{to, bytes}, remote{const_cast<void*>(from), bytes};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(bytes);
}

float* Buffer(size_t bytes, bool thp) {
  if (!thp) return static_cast<float*>(std::malloc(bytes));
  const size_t huge = 2u << 20;
  auto* p = static_cast<float*>(std::aligned_alloc(huge, (bytes + huge - 1) / huge * huge));
  if (p != nullptr) madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> pos;
  bool nt = false, thp = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nt") {
      nt = true;
    } else if (a == "--thp") {
      thp = true;
    } else {
      pos.push_back(a);
    }
  }
  if (pos.empty() || !__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr, "usage: %s BYTES [CHUNK_BYTES=1048576] [CALLS=20] [--nt] [--thp]   (needs AVX2)\n", argv[0]);
    return 2;
  }
  const size_t bytes = std::strtoull(pos[0].c_str(), nullptr, 0) / 8 * 8;
  const size_t chunk = pos.size() > 1 ? std::strtoull(pos[1].c_str(), nullptr, 0) / 4 * 4 : size_t{1} << 20;
  const int calls = pos.size() > 2 ? std::atoi(pos[2].c_str()) : 20;
  if (bytes == 0 || chunk == 0 || calls <= 0) {
    std::fprintf(stderr, "BYTES, CHUNK_BYTES (multiples of 4) and CALLS must be positive numbers\n");
    return 2;
  }
  auto* s =
      static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (s == MAP_FAILED) return 1;
  const pid_t child = fork();
  const int r = child == 0 ? 1 : 0, peer = 1 - r;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(r % std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))), &cpus);
  sched_setaffinity(0, sizeof(cpus), &cpus);

  const size_t n = bytes / 4, half = n / 2, per = chunk / 4;
  float* send = Buffer(bytes, thp);
  float* recv = Buffer(bytes, thp);
  if (send == nullptr || recv == nullptr) return 1;
  for (size_t i = 0; i < n; ++i) {
    send[i] = static_cast<float>(i % 1000 + static_cast<size_t>(r));
    recv[i] = -1;
  }
  std::vector<float> tile(per);
  s->pid[r] = getpid();
  s->send[r] = reinterpret_cast<uintptr_t>(send);
  s->recv[r] = reinterpret_cast<uintptr_t>(recv);
  int64_t gen = 0;
  Barrier(s, r, gen);
  const pid_t ppid = s->pid[peer];
  const auto* psend = reinterpret_cast<const float*>(s->send[peer].load());
  const auto* precv = reinterpret_cast<const float*>(s->recv[peer].load());
  const size_t mine = static_cast<size_t>(r) * half, mine_end = r == 1 ? n : half;
  const size_t theirs = static_cast<size_t>(peer) * half, theirs_end = peer == 1 ? n : half;
  const int64_t chunks = static_cast<int64_t>((mine_end - mine + per - 1) / per);
  const int64_t peer_chunks = static_cast<int64_t>((theirs_end - theirs + per - 1) / per);
  std::vector<double> us;
  for (int call = 0; call < calls; ++call) {
    Barrier(s, r, gen);
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t base = static_cast<int64_t>(call) * (std::max(chunks, peer_chunks) + 1);
    int64_t pulled = 0;
    const auto pull = [&](int64_t upto) {
      for (; pulled < upto; ++pulled) {
        const size_t o = theirs + static_cast<size_t>(pulled) * per, e = std::min(o + per, theirs_end);
        if (!ReadPeer(ppid, recv + o, precv + o, (e - o) * 4)) std::exit(1);
      }
    };
    for (int64_t k = 0; k < chunks; ++k) {
      const size_t o = mine + static_cast<size_t>(k) * per, e = std::min(o + per, mine_end);
      if (!ReadPeer(ppid, tile.data(), psend + o, (e - o) * 4)) std::exit(1);
      Add(recv + o, send + o, tile.data(), e - o, nt);
      s->done[r].store(base + k + 1, std::memory_order_release);
      pull(std::min(peer_chunks, s->done[peer].load(std::memory_order_acquire) - base));
    }
    while (pulled < peer_chunks) pull(std::min(peer_chunks, s->done[peer].load(std::memory_order_acquire) - base));
    // Neither rank leaves while the other may still read its output.
    Barrier(s, r, gen);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  for (size_t i = 0; i < n; ++i) {
    if (recv[i] != static_cast<float>(2 * (i % 1000) + 1)) {
      std::fprintf(stderr, "rank %d: wrong sum at element %zu: %g\n", r, i, static_cast<double>(recv[i]));
      return 1;
    }
  }
  std::sort(us.begin(), us.end());
  s->median_us[r] = us[us.size() / 2];
  Barrier(s, r, gen);
  if (r == 0) {
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("cma allreduce floor: %zu bytes, chunk %zu, %d calls%s%s: median %.1f us (rank 1 %.1f)\n", bytes, chunk,
                calls, nt ? ", streamed stores" : "", thp ? ", THP" : "", s->median_us[0], s->median_us[1]);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  return 0;
}

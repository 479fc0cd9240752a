// What a 2-rank fp32 sum allreduce of S bytes can cost on this machine when nothing but the data movement is
// left: two threads of one process (so no process boundary, no system call, no page pinning), each with its own
// input and output, streaming their outputs with non-temporal stores as the runtime does from 8 MiB.
//   ring    the runtime's data flow for ordinary buffers (the pipelined ring through shared slots): each thread
//           copies the half of its input the other one reduces into a slot, reduces its own half with the slot
//           the other filled (writing its output and a second slot), and copies the other's reduced half out of
//           that slot; slots of CHUNK bytes, SLOTS of them per direction.
//   return  the runtime's 2-rank flow over shm (RingAllreduceReturned): each thread copies the half the
//           other reduces into a slot; the other reduces it with its own half into its output and writes the
//           result back over the slot, from which the first copies it into its output; one set of slots per
//           direction instead of two.
//   direct  what a cross-process mapping of the peer's buffers (XPMEM-like, not available to processes here)
//           would allow: each thread reduces its half straight from both inputs into its output, then copies the
//           other half from the other thread's output as that thread finishes each chunk.
//   memcpy  each thread copies S bytes from its input to its output (the same working set, the plain copy).
// Timed as the peers' benchmark and `hccl-tune bench` time (docs/CONVENTIONS.md, Timing): a barrier, one timed call,
// the median over calls of the maximum over the threads; run it next to `hccl-tune bench` of the same sizes,
// alternating, to see how far the runtime is from the floor.
//
// STORES `plain` writes the outputs with ordinary stores (memcpy for the copies) instead.
//
//   hccltune-allreduce2-floor MODE (ring|return|direct|memcpy) [BYTES=16777216] [CHUNK=262144] [SLOTS=4] [CALLS=20]
//   [STORES=nt|plain]
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

bool g_plain = false;  // outputs with ordinary stores instead of non-temporal ones

__attribute__((target("avx2"))) void AddStream(const float* a, const float* b, float* out, float* also, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_load_ps(a + i), _mm256_load_ps(b + i));
    if (g_plain) {
      _mm256_store_ps(out + i, v);
    } else {
      _mm256_stream_ps(out + i, v);
    }
    if (also != nullptr) _mm256_store_ps(also + i, v);
  }
}

__attribute__((target("avx2"))) void CopyStream(const float* a, float* out, size_t n) {
  if (g_plain) {
    std::memcpy(out, a, n * sizeof(float));
    return;
  }
  for (size_t i = 0; i < n; i += 8) _mm256_stream_ps(out + i, _mm256_load_ps(a + i));
}

// One direction of slots: the producer's count of filled slots and the consumer's count of freed ones.
struct Channel {
  float* slots = nullptr;
  alignas(64) std::atomic<uint64_t> posted{0};
  uint64_t produced = 0;  // the producer's own count (its line)
  alignas(64) std::atomic<uint64_t> freed{0};
  uint64_t consumed = 0;  // the consumer's own count (its line)
};

class Barrier {
 public:
  void Wait() {
    const uint64_t gen = gen_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) == 1) {
      arrived_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      return;
    }
    while (gen_.load(std::memory_order_acquire) == gen) _mm_pause();
  }

 private:
  alignas(64) std::atomic<uint32_t> arrived_{0};
  alignas(64) std::atomic<uint64_t> gen_{0};
};

// 2 MiB-aligned buffers, freed at exit.
class Buffers {
 public:
  ~Buffers() {
    for (void* p : all_) std::free(p);
  }
  float* Alloc(size_t bytes) {
    void* p = std::aligned_alloc(2u << 20, (bytes + (2u << 20) - 1) & ~size_t{(2u << 20) - 1});
    if (p == nullptr) {
      std::fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
      std::exit(1);
    }
    all_.push_back(p);
    return static_cast<float*>(p);
  }

 private:
  std::vector<void*> all_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !__builtin_cpu_supports("avx2")) {
    std::fprintf(stderr,
                 "usage: %s ring|return|direct|memcpy [BYTES] [CHUNK] [SLOTS] [CALLS] [nt|plain] (needs AVX2)\n",
                 argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : 16u << 20;
  const size_t chunk = argc > 3 ? std::strtoull(argv[3], nullptr, 0) : 256u << 10;
  const uint64_t slots = argc > 4 ? std::strtoull(argv[4], nullptr, 0) : 4;
  const int calls = argc > 5 ? std::atoi(argv[5]) : 20;
  g_plain = argc > 6 && std::string(argv[6]) == "plain";
  const bool returned = mode == "return";
  if ((mode != "ring" && !returned && mode != "direct" && mode != "memcpy") || chunk == 0 || chunk % 32 != 0 ||
      bytes % (2 * chunk) != 0 || slots == 0 || calls < 4) {
    std::fprintf(stderr, "bad arguments: BYTES must be a multiple of 2 x CHUNK, CHUNK of 32, CALLS >= 4\n");
    return 2;
  }
  const size_t half = bytes / 2, nchunks = half / chunk, cf = chunk / sizeof(float);
  Buffers mem;
  Channel give[2], fwd[2];  // [r]: written by thread r
  for (int r = 0; r < 2; ++r) {
    give[r].slots = mem.Alloc(chunk * slots);
    fwd[r].slots = mem.Alloc(chunk * slots);
  }
  if (returned) {  // the results go back through the slot they came in: fwd[r] is give[p]'s memory
    fwd[0].slots = give[1].slots;
    fwd[1].slots = give[0].slots;
  }
  float* in[2] = {mem.Alloc(bytes), mem.Alloc(bytes)};
  float* out[2] = {mem.Alloc(bytes), mem.Alloc(bytes)};
  std::atomic<uint64_t> done_chunks[2];  // direct: chunks of its own half reduced, over all calls
  done_chunks[0] = done_chunks[1] = 0;
  Barrier barrier;
  std::vector<double> us[2];
  bool ok[2] = {true, true};

  auto run = [&](int r) {
    const int p = 1 - r;
    for (size_t i = 0; i < bytes / sizeof(float); ++i) in[r][i] = static_cast<float>(r + 1);
    std::memset(out[r], 0, bytes);
    auto space = [&](Channel& c) { return c.produced - c.freed.load(std::memory_order_acquire) < slots; };
    auto slot_out = [&](Channel& c) { return c.slots + (c.produced % slots) * cf; };
    auto post = [&](Channel& c) { c.posted.store(++c.produced, std::memory_order_release); };
    auto ready = [&](Channel& c) { return c.posted.load(std::memory_order_acquire) > c.consumed; };
    auto slot_in = [&](Channel& c) { return c.slots + (c.consumed % slots) * cf; };
    auto release = [&](Channel& c) { c.freed.store(++c.consumed, std::memory_order_release); };
    const float want = mode == "memcpy" ? static_cast<float>(r + 1) : 3.0f;
    const size_t total = bytes / sizeof(float);
    for (int call = 0; call < calls; ++call) {
      // A sentinel at both ends of every chunk of the output, checked after the call: a chunk the call skipped
      // keeps it (a few cache lines, so the timed call finds the output as the previous call left it).
      for (size_t i = 0; i < total; i += cf) out[r][i] = out[r][i + cf - 1] = -1.0f;
      barrier.Wait();
      const auto t0 = std::chrono::steady_clock::now();
      const size_t mine = static_cast<size_t>(r) * half / sizeof(float);
      const size_t theirs = static_cast<size_t>(p) * half / sizeof(float);
      if (mode == "memcpy") {
        CopyStream(in[r], out[r], bytes / sizeof(float));
      } else if (mode == "ring" || returned) {
        size_t sent = 0, reduced = 0, got = 0;
        while (got < nchunks || reduced < nchunks) {
          if (sent < nchunks && sent < reduced + slots && space(give[r])) {
            std::memcpy(slot_out(give[r]), in[r] + theirs + sent * cf, chunk);
            post(give[r]);
            ++sent;
          } else if (reduced < nchunks && ready(give[p]) && (returned || space(fwd[r]))) {
            const size_t off = mine + reduced * cf;
            float* slot = slot_in(give[p]);
            AddStream(in[r] + off, slot, out[r] + off, returned ? slot : slot_out(fwd[r]), cf);
            post(fwd[r]);
            if (returned) {
              ++give[p].consumed;  // not freed: the other thread frees it once it took the result back
            } else {
              release(give[p]);
            }
            ++reduced;
          } else if (ready(fwd[p])) {
            CopyStream(slot_in(fwd[p]), out[r] + theirs + got * cf, cf);
            release(fwd[p]);
            if (returned) give[r].freed.store(fwd[p].consumed, std::memory_order_release);
            ++got;
          }
        }
      } else {
        const uint64_t base = static_cast<uint64_t>(call) * nchunks;
        for (size_t c = 0; c < nchunks; ++c) {
          AddStream(in[r] + mine + c * cf, in[p] + mine + c * cf, out[r] + mine + c * cf, nullptr, cf);
          _mm_sfence();
          done_chunks[r].store(base + c + 1, std::memory_order_release);
        }
        for (size_t c = 0; c < nchunks; ++c) {
          while (done_chunks[p].load(std::memory_order_acquire) < base + c + 1) _mm_pause();
          CopyStream(out[p] + theirs + c * cf, out[r] + theirs + c * cf, cf);
        }
      }
      _mm_sfence();
      us[r].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      barrier.Wait();  // nobody starts the next call (rewriting slots or sentinels) while the other still reads
      for (size_t i = 0; i < total; i += cf) ok[r] = ok[r] && out[r][i] == want && out[r][i + cf - 1] == want;
    }
    for (size_t i = 0; i < total; i += 1021) ok[r] = ok[r] && out[r][i] == want;
  };
  std::thread t0(run, 0), t1(run, 1);
  t0.join();
  t1.join();
  if (!ok[0] || !ok[1]) {
    std::fprintf(stderr, "wrong result\n");
    return 1;
  }
  std::vector<double> worst;
  for (int i = 3; i < calls; ++i)
    worst.push_back(std::max(us[0][static_cast<size_t>(i)], us[1][static_cast<size_t>(i)]));
  std::sort(worst.begin(), worst.end());
  std::printf("%s %zu bytes chunk %zu slots %llu %s stores: median %.1f us over %zu calls\n", mode.c_str(), bytes,
              chunk, static_cast<unsigned long long>(slots), g_plain ? "plain" : "nt", worst[worst.size() / 2],
              worst.size());
  return 0;
}

// Google Benchmark microbenchmarks of the reduction kernels (runtime/reduce/kernels.h), every dtype, next to
// memcpy of the same size — a bench target, not a test (timings are never asserted).
//
//   build/tests/perf/hccltune-kernels-bench                       # everything
//   build/tests/perf/hccltune-kernels-bench --benchmark_filter='Memcpy/67108864'   # the memory bound
//
// bytes_per_second counts *output* bytes: memcpy reads 1 and writes 1 byte per output byte, a reduction
// reads 2 and writes 1, so a memory-bound reduction runs at about 2/3 of memcpy's figure. Sizes: 256 KiB
// (in L2, what the shm receive-and-reduce path combines per piece) and 64 MiB (memory). Memcpy also runs on
// two threads (separate buffers): the machine's whole copy bandwidth, which tests/perf/compare-peers.sh
// uses for the bound. The *Streaming variants write with non-temporal stores (runtime/common/stream_copy.h,
// HCCL_TUNE_NT_STORES): what the runtime uses for the output of calls of 32 MiB and more. RingExchange is
// the floor under a 2-rank allreduce on ordinary buffers: two threads passing their buffers to each other
// through shared rings, nothing else.
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/common/stream_copy.h"
#include "runtime/common/types.h"
#include "runtime/reduce/kernels.h"

namespace {

using hccltune::DataType;
using hccltune::ReduceOp;

struct Buffers {
  explicit Buffers(size_t bytes) : a(bytes, 1), b(bytes, 2), out(bytes, 0) {}
  std::vector<uint8_t> a, b, out;
};

// Times `kernel(buf, bytes)` over fresh buffers of state.range(0) bytes; throughput in output bytes.
template <typename Kernel>
void TimeKernel(benchmark::State& state, Kernel kernel) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Buffers buf(bytes);
  for (auto _ : state) {
    kernel(buf, bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void BM_Memcpy(benchmark::State& state) {
  TimeKernel(state, [](Buffers& b, size_t bytes) { std::memcpy(b.out.data(), b.a.data(), bytes); });
}

void BM_CopyStreaming(benchmark::State& state) {
  TimeKernel(state, [](Buffers& b, size_t bytes) { hccltune::CopyStreaming(b.out.data(), b.a.data(), bytes); });
}

template <DataType T>
void BM_ReduceStreaming(benchmark::State& state) {
  TimeKernel(state, [](Buffers& b, size_t bytes) {
    hccltune::ReduceStreaming(T, ReduceOp::kSum, b.out.data(), b.a.data(), b.b.data(),
                              bytes / hccltune::DataTypeSize(T));
  });
}

template <DataType T, ReduceOp Op>
void BM_Reduce(benchmark::State& state) {
  TimeKernel(state, [](Buffers& b, size_t bytes) {
    hccltune::Reduce(T, Op, b.out.data(), b.a.data(), b.b.data(), bytes / hccltune::DataTypeSize(T));
  });
}

// In place, as the ring's receive-and-reduce does it (out = out op in).
template <DataType T>
void BM_ReduceInto(benchmark::State& state) {
  TimeKernel(state, [](Buffers& b, size_t bytes) {
    hccltune::Reduce(T, ReduceOp::kSum, b.out.data(), b.out.data(), b.b.data(), bytes / hccltune::DataTypeSize(T));
  });
}

// The `symmetric` allreduce's kernel at 2 ranks: both inputs combined and stored to two outputs in one pass
// (out and a second output the size of the inputs); `streaming`: non-temporal stores. Output bytes counted once.
template <bool streaming, ReduceOp Op = ReduceOp::kSum>
void BM_ReduceFanout(benchmark::State& state) {
  std::vector<uint8_t> second(static_cast<size_t>(state.range(0)));
  TimeKernel(state, [&second](Buffers& b, size_t bytes) {
    const void* in[2] = {b.a.data(), b.b.data()};
    void* out[2] = {b.out.data(), second.data()};
    hccltune::ReduceFanout(DataType::kFloat32, Op, in, 2, out, 2, bytes / 4, streaming);
  });
}

// fp16 / bf16 avg (kernels.h, "avg"). ScaleForAvg: the pass that scales an input into the working buffer (ring,
// trees). Avg4: four inputs of state.range(0) bytes averaged into one output in L1 tiles, as the symmetric
// algorithms' tiled path does — AverageN (each input scaled, summed in fp32, rounded once) against what it
// replaced there (three chained Reduce calls and a FinalizeAvg per tile). Output bytes counted. The inputs hold
// 1.0 (the byte patterns of the other benchmarks are tiny bf16 values whose quarter is an fp32 subnormal, which
// the CPU multiplies in microcode: not what gradients look like).
void FillOnes(DataType t, std::vector<uint8_t>& v) {
  const uint16_t one = t == DataType::kFloat16 ? 0x3c00 : 0x3f80;
  for (size_t i = 0; i + 1 < v.size(); i += 2) std::memcpy(&v[i], &one, 2);
}

template <DataType T>
void BM_ScaleForAvg(benchmark::State& state) {
  bool filled = false;
  TimeKernel(state, [&](Buffers& b, size_t bytes) {
    if (!filled) FillOnes(T, b.a), filled = true;
    hccltune::ScaleForAvg(T, b.out.data(), b.a.data(), bytes / hccltune::DataTypeSize(T), 4);
  });
}

template <DataType T, bool kAverageN>
void BM_Avg4(benchmark::State& state) {
  std::vector<uint8_t> c(static_cast<size_t>(state.range(0))), d(static_cast<size_t>(state.range(0)));
  FillOnes(T, c), FillOnes(T, d);
  bool filled = false;
  TimeKernel(state, [&](Buffers& b, size_t bytes) {
    if (!filled) FillOnes(T, b.a), FillOnes(T, b.b), filled = true;
    const size_t es = hccltune::DataTypeSize(T);
    const void* in[4] = {b.a.data(), b.b.data(), c.data(), d.data()};
    constexpr size_t kTileBytes = 32u << 10;  // kSymmetricTileBytes
    alignas(64) static uint8_t tile[kTileBytes];
    for (size_t i = 0; i < bytes; i += kTileBytes) {
      const size_t t = std::min(kTileBytes, bytes - i) / es;
      if constexpr (kAverageN) {
        hccltune::AverageN(T, in, 4, i / es, tile, t);
      } else {
        hccltune::Reduce(T, ReduceOp::kAvg, tile, b.a.data() + i, b.b.data() + i, t);
        hccltune::Reduce(T, ReduceOp::kAvg, tile, tile, c.data() + i, t);
        hccltune::Reduce(T, ReduceOp::kAvg, tile, tile, d.data() + i, t);
        hccltune::FinalizeAvg(T, tile, t, 4);
      }
      std::memcpy(b.out.data() + i, tile, t * es);
    }
  });
}

// Two threads (on CPUs 0 and 1) exchange state.range(0) bytes each through two 4 MiB rings, one per direction,
// as two ranks' shm transport does: each copies its input into the ring the other reads (memcpy, 16 KiB pieces)
// and streams what it reads from the other's ring into its output (non-temporal stores); no reduction, no
// headers, no doorbell. A 2-rank ring allreduce of S bytes on ordinary buffers moves S bytes per direction the
// same way (half its input, then half the result) and reduces on top; CopyStreaming on two threads is the same
// two copies per byte without the rings. bytes_per_second: both directions.
struct ExchangeRings {
  static constexpr size_t kRing = 4u << 20;
  static constexpr size_t kPiece = 16u << 10;
  struct alignas(64) Index {
    std::atomic<uint64_t> value{0};
  };
  std::vector<uint8_t> ring[2] = {std::vector<uint8_t>(kRing, 0), std::vector<uint8_t>(kRing, 0)};
  Index head[2];  // bytes written into ring d by thread d
  Index tail[2];  // bytes of ring d consumed by thread 1 - d
};

void BM_RingExchange(benchmark::State& state) {
  static ExchangeRings rings;
  const int me = state.thread_index();
  const int peer = 1 - me;
  const size_t bytes = static_cast<size_t>(state.range(0));
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(me % std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)), &cpus);
  pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
  // The thread's input and output in transparent huge pages where the system allows them, as the runtime puts
  // a large buffer that comes back (HCCL_TUNE_THP).
  constexpr size_t kHuge = 2u << 20;
  const size_t alloc = (bytes + kHuge - 1) / kHuge * kHuge;
  std::unique_ptr<uint8_t, decltype(&std::free)> in(static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc)),
                                                    &std::free);
  std::unique_ptr<uint8_t, decltype(&std::free)> out(static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc)),
                                                     &std::free);
  madvise(in.get(), alloc, MADV_HUGEPAGE);
  madvise(out.get(), alloc, MADV_HUGEPAGE);
  std::memset(in.get(), 1, alloc);
  std::memset(out.get(), 0, alloc);
  // Both threads run the same number of iterations; the counters are reset before the loop's start barrier.
  rings.head[me].value.store(0);
  rings.tail[me].value.store(0);
  constexpr size_t kRing = ExchangeRings::kRing;
  constexpr size_t kPiece = ExchangeRings::kPiece;
  uint64_t written = 0;
  uint64_t consumed = 0;
  for (auto _ : state) {
    const uint64_t end_w = written + bytes;
    const uint64_t end_r = consumed + bytes;
    while (written < end_w || consumed < end_r) {
      if (written < end_w && written + kPiece - rings.tail[me].value.load(std::memory_order_acquire) <= kRing) {
        const size_t n = std::min<size_t>(kPiece, end_w - written);
        std::memcpy(rings.ring[me].data() + written % kRing, in.get() + (bytes - (end_w - written)), n);
        written += n;
        rings.head[me].value.store(written, std::memory_order_release);
      }
      const uint64_t avail = rings.head[peer].value.load(std::memory_order_acquire);
      if (consumed < end_r && avail > consumed) {
        const size_t n = std::min<size_t>({kPiece, avail - consumed, end_r - consumed});
        hccltune::CopyStreaming(out.get() + (bytes - (end_r - consumed)), rings.ring[peer].data() + consumed % kRing,
                                n);
        consumed += n;
        rings.tail[peer].value.store(consumed, std::memory_order_release);
      }
    }
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

constexpr int64_t kSmall = 256 << 10;
constexpr int64_t kLarge = 64 << 20;

BENCHMARK(BM_Memcpy)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Memcpy)->Arg(kLarge)->Threads(2)->UseRealTime();
BENCHMARK(BM_CopyStreaming)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_CopyStreaming)->Arg(kLarge)->Threads(2)->UseRealTime();
BENCHMARK(BM_RingExchange)->Arg(16 << 20)->Arg(kLarge)->Threads(2)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kInt8, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kUint8, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kInt32, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kInt64, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat16, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kBfloat16, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat32, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat64, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat32, ReduceOp::kMax>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat32, ReduceOp::kMin>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat64, ReduceOp::kMax>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat16, ReduceOp::kMax>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kBfloat16, ReduceOp::kMin>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat32, ReduceOp::kAvg>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat16, ReduceOp::kAvg>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_ReduceStreaming<DataType::kFloat32>)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceStreaming<DataType::kBfloat16>)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceInto<DataType::kFloat32>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceFanout<false>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceFanout<true>)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceFanout<false, ReduceOp::kMax>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_ScaleForAvg<DataType::kFloat16>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ScaleForAvg<DataType::kBfloat16>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Avg4<DataType::kFloat16, true>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Avg4<DataType::kFloat16, false>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Avg4<DataType::kBfloat16, true>)->Arg(kSmall)->UseRealTime();
BENCHMARK(BM_Avg4<DataType::kBfloat16, false>)->Arg(kSmall)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

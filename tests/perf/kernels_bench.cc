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
// HCCL_TUNE_NT_STORES): what the runtime uses for the output of calls of 32 MiB and more.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
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
template <bool streaming>
void BM_ReduceFanout(benchmark::State& state) {
  std::vector<uint8_t> second(static_cast<size_t>(state.range(0)));
  TimeKernel(state, [&second](Buffers& b, size_t bytes) {
    const void* in[2] = {b.a.data(), b.b.data()};
    void* out[2] = {b.out.data(), second.data()};
    hccltune::ReduceFanout(DataType::kFloat32, ReduceOp::kSum, in, 2, out, 2, bytes / 4, streaming);
  });
}

constexpr int64_t kSmall = 256 << 10;
constexpr int64_t kLarge = 64 << 20;

BENCHMARK(BM_Memcpy)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Memcpy)->Arg(kLarge)->Threads(2)->UseRealTime();
BENCHMARK(BM_CopyStreaming)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_CopyStreaming)->Arg(kLarge)->Threads(2)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kInt8, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kUint8, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kInt32, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kInt64, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat16, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kBfloat16, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat32, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat64, ReduceOp::kSum>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_Reduce<DataType::kFloat32, ReduceOp::kMax>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceStreaming<DataType::kFloat32>)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceStreaming<DataType::kBfloat16>)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceInto<DataType::kFloat32>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceFanout<false>)->Arg(kSmall)->Arg(kLarge)->UseRealTime();
BENCHMARK(BM_ReduceFanout<true>)->Arg(kLarge)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();

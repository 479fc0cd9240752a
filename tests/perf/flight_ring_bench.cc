// The flight recorder's cost per call (budget: <= 10 ns, docs/TROUBLESHOOTING.md): what ExecuteLocked adds to
// every untimed call — Begin and End, no clock — next to the clocks it does not read per call, and what a heartbeat
// reads once a second.
//   build/tests/perf/hccltune-flight-ring-bench
#include <benchmark/benchmark.h>

#include "runtime/common/flight_ring.h"

namespace hccltune {
namespace {

// The whole per-call record, as the communicator makes it for an untimed call.
void BM_RecordCall(benchmark::State& state) {
  FlightRing ring(2048);
  uint32_t op = 0;
  for (auto _ : state) {
    const uint32_t slot = ring.Begin(++op, Collective::kAllreduce, DataType::kFloat32, 8, 3, 4);
    ring.End(slot, FlightState::kCompleted);
  }
  benchmark::DoNotOptimize(ring.written());
}
BENCHMARK(BM_RecordCall);

// What a heartbeat reads once a second per communicator (runtime/api/job_progress.cc): a snapshot of a full ring of
// the default 2048 records, copied off the call path by the tuning client's thread.
void BM_HeartbeatSnapshot(benchmark::State& state) {
  FlightRing ring(2048);
  for (uint32_t op = 1; op <= 4096; ++op) {
    ring.End(ring.Begin(op, Collective::kAllreduce, DataType::kFloat32, 8, 3, 4), FlightState::kCompleted);
  }
  for (auto _ : state) benchmark::DoNotOptimize(ring.Snapshot());
}
BENCHMARK(BM_HeartbeatSnapshot);

// The clock alone, and the steady clock it replaces on the per-call path.
void BM_CoarseClock(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(CoarseNowNs());
}
BENCHMARK(BM_CoarseClock);
void BM_SteadyClock(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(std::chrono::steady_clock::now());
}
BENCHMARK(BM_SteadyClock);

}  // namespace
}  // namespace hccltune

BENCHMARK_MAIN();

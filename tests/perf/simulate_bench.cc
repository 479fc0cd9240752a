// `hccl-tune simulate`'s computation (model::Simulate) for every collective, 8 B – 64 MiB, at 8 to 4096 ranks
// (< 1 s at 4096 ranks is the target):
//   build/tests/perf/hccltune-simulate-bench
#include <benchmark/benchmark.h>

#include <vector>

#include "model/simulate.h"

namespace hccltune::model {
namespace {

ClusterProfile Profile() {
  ClusterProfile p;
  p.name = "bench";
  p.intra = {2e-6, 0.3e-6, 1 / 30e9};
  p.inter = {6e-6, 1e-6, 1 / 12.5e9};
  p.nics_per_node = 8;
  p.gamma_s = 1 / 40e9;
  return p;
}

void BM_SimulateEveryCollective(benchmark::State& state) {
  const Shape shape{static_cast<int>(state.range(0)) / 8, 8};
  std::vector<Collective> colls;
  for (Collective c : AllCollectives()) {
    if (c != Collective::kSendRecv) colls.push_back(c);
  }
  for (auto _ : state) benchmark::DoNotOptimize(Simulate(Profile(), shape, colls, 8, 64 << 20));
}
BENCHMARK(BM_SimulateEveryCollective)->Arg(8)->Arg(128)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace hccltune::model

BENCHMARK_MAIN();

// Per-call configuration lookup (issue: tuned at training time, <= 100 ns per lookup): Selector::Choose with a
// tuned table of realistic size installed, against the layers in front of it (an HCCL_TUNE_ALGO override) and
// behind it (the built-in defaults).
//   build/tests/perf/hccltune-selector-bench
#include <benchmark/benchmark.h>

#include <memory>

#include "runtime/algorithms/registry.h"
#include "runtime/selector/selector.h"

namespace hccltune {
namespace {

GroupTopology OneNode(int n) {
  GroupTopology t;
  t.node_of.assign(static_cast<size_t>(n), 0);
  return t;
}

// A table like a sweep leaves: every collective x dtype with 8 byte ranges.
std::shared_ptr<TunedTable> SweptTable(int world) {
  auto t = std::make_shared<TunedTable>();
  t->version = 1;
  for (Collective c : {Collective::kAllreduce, Collective::kAllgather, Collective::kReducescatter,
                       Collective::kBroadcast, Collective::kAlltoall}) {
    for (DataType d : AllDataTypes()) {
      uint64_t lo = 0;
      for (int i = 0; i < 8; ++i) {
        const uint64_t hi = i == 7 ? kUnbounded : (uint64_t{4096} << (2 * i));
        const std::vector<std::string> algos = registry::AlgorithmsFor(c);
        t->entries.push_back(
            {c, d, world, {lo, hi}, *Configuration::Default(algos[static_cast<size_t>(i) % algos.size()])});
        lo = hi;
      }
    }
  }
  return t;
}

void BM_ChooseFromTable(benchmark::State& state) {
  auto s = Selector::Create(Environment{}, 4, OneNode(4));
  s->SetTable(SweptTable(4));
  uint64_t bytes = 8;
  for (auto _ : state) {
    auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, bytes);
    benchmark::DoNotOptimize(c);
    bytes = bytes * 3 % (uint64_t{1} << 28) + 8;  // walk the ranges
  }
}
BENCHMARK(BM_ChooseFromTable);

void BM_ChooseOverride(benchmark::State& state) {
  Environment env;
  env.tune_algo = "allreduce:0-64K=one_shot,64K-=ring(chunk=1M)";
  auto s = Selector::Create(env, 4, OneNode(4));
  s->SetTable(SweptTable(4));
  uint64_t bytes = 8;
  for (auto _ : state) {
    auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, bytes);
    benchmark::DoNotOptimize(c);
    bytes = bytes * 3 % (uint64_t{1} << 28) + 8;
  }
}
BENCHMARK(BM_ChooseOverride);

void BM_ChooseDefaults(benchmark::State& state) {
  auto s = Selector::Create(Environment{}, 4, OneNode(4));
  uint64_t bytes = 8;
  for (auto _ : state) {
    auto c = s->Choose(Collective::kAllreduce, DataType::kFloat32, bytes);
    benchmark::DoNotOptimize(c);
    bytes = bytes * 3 % (uint64_t{1} << 28) + 8;
  }
}
BENCHMARK(BM_ChooseDefaults);

}  // namespace
}  // namespace hccltune

BENCHMARK_MAIN();
